package lbstub_test

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/lab/labtest"
	"github.com/causeway-net/causeway/pkg/lab/lbstub"
	"github.com/causeway-net/causeway/pkg/lab/targetaddrs"
	"github.com/causeway-net/causeway/pkg/lab/topo"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
)

// vipGateways reads the LB's route to the VIP: its gateways, sorted.
func vipGateways(t *testing.T, ns *testutil.NetNS) []string { return gatewaysTo(t, ns, "20.0.0.1") }

func gatewaysTo(t *testing.T, ns *testutil.NetNS, vip string) []string {
	t.Helper()
	h, err := netlink.NewHandleAt(ns.Handle)
	require.NoError(t, err)
	defer h.Close()
	a := netip.MustParseAddr(vip)
	fam := netlink.FAMILY_V4
	if a.Is6() {
		fam = netlink.FAMILY_V6
	}
	routes, err := h.RouteListFiltered(fam,
		&netlink.Route{Dst: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}}, netlink.RT_FILTER_DST)
	require.NoError(t, err)
	var gws []string
	for _, r := range routes {
		require.Equal(t, lbstub.RouteProtocol, r.Protocol)
		if r.Gw != nil {
			gws = append(gws, r.Gw.String())
		}
		for _, nh := range r.MultiPath {
			gws = append(gws, nh.Gw.String())
		}
	}
	slices.Sort(gws)
	return gws
}

func TestLBStubRoutesFollowTargets(t *testing.T) {
	bed := labtest.NewBed(t, "lb", controlplane.Config{})
	ctx, cp, lbNS, prxNS := bed.Ctx, bed.CP, bed.Stub, bed.Proxy
	extNS := testutil.NewNetNS(t, "ext")
	targets := filepath.Join(bed.Dir, "targets")

	vip := netip.MustParseAddr("20.0.0.1")
	vip6 := netip.MustParseAddr("2001:db8::1")
	lb, err := lbstub.Start(ctx, lbstub.Config{
		Name: "lb-a", NSMgrURL: cp.NSMgrURL, Service: "c.t.ns", SocketPath: filepath.Join(bed.Dir, "lb-a.sock"),
		NetNSPath: lbNS.Path(), VIPs: []netip.Addr{vip, vip6}, TargetsDir: targets,
	})
	require.NoError(t, err)
	defer lb.Stop()
	require.Equal(t, "1", strings.TrimSpace(lbNS.MustExec(t, "cat", "/proc/sys/net/ipv4/ip_forward")))
	require.Equal(t, "3", strings.TrimSpace(lbNS.MustExec(t, "cat", "/proc/sys/net/ipv4/fib_multipath_hash_policy")))

	// The proxy is the NSC and assigns both ends' addresses.
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	proxy := controlplane.NewClient(pctx, controlplane.ClientConfig{Name: "proxy", NSMgrURL: cp.NSMgrURL, InterfaceName: "lb-a", NetNSPath: prxNS.Path()})
	conn, err := proxy.Request(ctx, &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{
		Id: "proxy-lb-a", NetworkService: "c.t.ns",
		Context: &networkservice.ConnectionContext{IpContext: &networkservice.IPContext{
			SrcIpAddrs: []string{"172.16.1.2/24", "fd00:1::2/64"}, DstIpAddrs: []string{"172.16.1.3/24", "fd00:1::3/64"},
		}},
	}})
	require.NoError(t, err)

	// External host behind the LB; the "proxy" namespace plays the targets.
	require.NoError(t, topo.AddVeth(
		topo.VethEnd{NetNSPath: lbNS.Path(), Name: "ext0", Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24")}},
		topo.VethEnd{NetNSPath: extNS.Path(), Name: "lb0", Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24")}}))
	require.NoError(t, topo.AddRoute(extNS.Path(), netip.MustParsePrefix("20.0.0.1/32"), netip.MustParseAddr("10.0.0.1")))
	prxNS.MustExec(t, "ip", "addr", "add", "20.0.0.1/32", "dev", "lo")
	prxNS.MustExec(t, "ip", "addr", "add", "172.16.1.10/24", "dev", "lb-a")
	require.NoError(t, topo.AddRoute(prxNS.Path(), netip.MustParsePrefix("10.0.0.0/24"), netip.MustParseAddr("172.16.1.3")))

	t1, t2 := netip.MustParseAddr("172.16.1.10"), netip.MustParseAddr("172.16.1.11")
	require.NoError(t, targetaddrs.Publish(targets, "t1", []netip.Addr{t1, netip.MustParseAddr("fd00:1::10")}))
	require.NoError(t, targetaddrs.Publish(targets, "off-link", []netip.Addr{netip.MustParseAddr("10.9.9.9")}))
	require.Eventually(t, func() bool { return slices.Equal(vipGateways(t, lbNS), []string{"172.16.1.10"}) },
		20*time.Second, 100*time.Millisecond)
	require.Eventually(t, func() bool {
		_, err := extNS.Exec("ping", "-c1", "-W1", "20.0.0.1")
		return err == nil
	}, 20*time.Second, 200*time.Millisecond, "external host reaches the VIP through the LB")

	require.NoError(t, targetaddrs.Publish(targets, "t2", []netip.Addr{t2, netip.MustParseAddr("fd00:1::11")}))
	require.Eventually(t, func() bool {
		return slices.Equal(vipGateways(t, lbNS), []string{"172.16.1.10", "172.16.1.11"})
	}, 20*time.Second, 100*time.Millisecond, "multipath over both targets")
	require.Eventually(t, func() bool {
		return slices.Equal(gatewaysTo(t, lbNS, "2001:db8::1"), []string{"fd00:1::10", "fd00:1::11"})
	}, 20*time.Second, 100*time.Millisecond, "IPv6 multipath over both targets")

	require.NoError(t, targetaddrs.Withdraw(targets, "t1"))
	require.Eventually(t, func() bool {
		return slices.Equal(vipGateways(t, lbNS), []string{"172.16.1.11"}) &&
			slices.Equal(gatewaysTo(t, lbNS, "2001:db8::1"), []string{"fd00:1::11"})
	}, 20*time.Second, 100*time.Millisecond)
	require.NoError(t, targetaddrs.Withdraw(targets, "t2"))
	require.Eventually(t, func() bool { return len(vipGateways(t, lbNS)) == 0 && len(gatewaysTo(t, lbNS, "2001:db8::1")) == 0 },
		20*time.Second, 100*time.Millisecond, "no targets, no route")

	_, err = proxy.Close(ctx, conn)
	require.NoError(t, err)
	pcancel()
	lb.Stop()
	cp.Stop()
}
