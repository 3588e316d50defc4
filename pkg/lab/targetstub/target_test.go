package targetstub_test

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"

	"github.com/causeway-net/causeway/internal/netnsdo"
	"github.com/causeway-net/causeway/pkg/lab/labtest"
	"github.com/causeway-net/causeway/pkg/lab/targetaddrs"
	"github.com/causeway-net/causeway/pkg/lab/targetstub"
	"github.com/causeway-net/causeway/pkg/lab/traffic"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
)

// fakeProxy hands out the target address and the gateway like the proxy
// does, keeping whatever else (VIPs, policies) the target asks for; seen,
// when set, is shown each request's connection first.
type fakeProxy struct {
	seen func(*networkservice.Connection)
}

func (p fakeProxy) Request(ctx context.Context, r *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	c := r.GetConnection()
	if p.seen != nil {
		p.seen(c)
	}
	if c.GetContext() == nil {
		c.Context = &networkservice.ConnectionContext{}
	}
	if c.Context.IpContext == nil {
		c.Context.IpContext = &networkservice.IPContext{}
	}
	ipc := c.Context.IpContext
	for _, a := range []string{"172.16.1.5/24", "fd00:1::5/64"} {
		if !slices.Contains(ipc.SrcIpAddrs, a) {
			ipc.SrcIpAddrs = append(ipc.SrcIpAddrs, a)
		}
	}
	ipc.DstIpAddrs = []string{"172.16.1.1/24", "fd00:1::1/64"}
	ipc.ExtraPrefixes = []string{"172.16.1.1/24", "fd00:1::1/64"}
	return next.Server(ctx).Request(ctx, r)
}

func (fakeProxy) Close(ctx context.Context, c *networkservice.Connection) (*empty.Empty, error) {
	return next.Server(ctx).Close(ctx, c)
}

// newFakeProxyBed is a bed whose proxy namespace holds an NSE of the
// proxy's service that hands out addresses as proxy does.
func newFakeProxyBed(t *testing.T, prefix string, proxy fakeProxy) (*labtest.Bed, *controlplane.Endpoint) {
	t.Helper()
	bed := labtest.NewBed(t, prefix, controlplane.Config{})
	nse, err := controlplane.StartEndpoint(bed.Ctx, controlplane.EndpointConfig{
		Name: "fake-proxy", Service: "proxy.c.t.ns", NSMgrURL: bed.CP.NSMgrURL,
		SocketPath: filepath.Join(bed.Dir, "proxy.sock"), NetNSPath: bed.Proxy.Path(),
		Elements: []networkservice.NetworkServiceServer{proxy},
	})
	require.NoError(t, err)
	t.Cleanup(nse.Stop)
	return bed, nse
}

func TestTargetStub(t *testing.T) {
	// The target publishes its addresses (the LBs route the VIPs to it)
	// only once it answers on the VIPs: not after the first request, whose
	// answer brings its addresses but not the VIPs yet.
	var pubDir string
	var early atomic.Bool
	bed, nse := newFakeProxyBed(t, "tgt", fakeProxy{seen: func(c *networkservice.Connection) {
		if slices.Contains(c.GetContext().GetIpContext().GetSrcIpAddrs(), "20.0.0.1/32") {
			if pubs, err := targetaddrs.Read(pubDir); err == nil && len(pubs) > 0 {
				early.Store(true)
			}
		}
	}})
	ctx, cp, tgtNS, prxNS := bed.Ctx, bed.CP, bed.Stub, bed.Proxy
	pubDir = filepath.Join(bed.Dir, "targets")

	vip := netip.MustParseAddr("20.0.0.1")
	vip6 := netip.MustParseAddr("2001:db8::1")
	tgt, err := targetstub.Start(ctx, targetstub.Config{
		Name: "target-a", NSMgrURL: cp.NSMgrURL, Service: "proxy.c.t.ns",
		Labels: map[string]string{"nodeName": "lab"}, VIPs: []netip.Addr{vip, vip6}, Port: 5000,
		PublishDir: pubDir, NetNSPath: tgtNS.Path(),
	})
	require.NoError(t, err)
	defer func() { _ = tgt.Stop(context.Background()) }()

	own := []netip.Addr{netip.MustParseAddr("172.16.1.5"), netip.MustParseAddr("fd00:1::5")}
	require.Equal(t, own, tgt.Addrs())
	pubs, err := targetaddrs.Read(pubDir)
	require.NoError(t, err)
	require.Equal(t, map[string][]netip.Addr{"target-a": own}, pubs)
	require.False(t, early.Load(), "published before the connection carried the VIPs")

	// Kernel state of the target: VIP on the NSM interface, policy route.
	h, err := netlink.NewHandleAt(tgtNS.Handle)
	require.NoError(t, err)
	defer h.Close()
	link, err := h.LinkByName(targetstub.DefaultInterfaceName)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"172.16.1.5/24", "20.0.0.1/32"}, addrsOf(t, h, link, netlink.FAMILY_V4))
	routes := vipRoutes(t, h, netlink.FAMILY_V4, "20.0.0.1/32")
	require.Len(t, routes, 1)
	require.Equal(t, "172.16.1.1", routes[0].Gw.String())
	require.True(t, routes[0].Dst == nil || routes[0].Dst.String() == "0.0.0.0/0", "default route in the VIP's table, got %v", routes[0].Dst)

	require.ElementsMatch(t, []string{"fd00:1::5/64", "2001:db8::1/128"}, addrsOf(t, h, link, netlink.FAMILY_V6))
	routes6 := vipRoutes(t, h, netlink.FAMILY_V6, "2001:db8::1/128")
	require.Len(t, routes6, 1)
	require.Equal(t, "fd00:1::1", routes6[0].Gw.String())

	// A peer outside the target subnet reaches the VIP: the reply only finds
	// its way back through the policy route.
	prxNS.MustExec(t, "ip", "addr", "add", "10.99.0.1/32", "dev", "lo")
	prxNS.MustExec(t, "ip", "route", "replace", "20.0.0.1/32", "via", "172.16.1.5")
	local := netip.MustParseAddr("10.99.0.1")
	require.Eventually(t, func() bool {
		name, err := traffic.Ask(ctx, prxNS.Path(), "tcp", local, netip.MustParseAddrPort("20.0.0.1:5000"), labtest.AskTimeout)
		return err == nil && name == "target-a"
	}, 20*time.Second, 200*time.Millisecond, "tcp echo from the VIP")
	require.Eventually(t, func() bool {
		name, err := traffic.Ask(ctx, prxNS.Path(), "udp", local, netip.MustParseAddrPort("20.0.0.1:5000"), labtest.AskTimeout)
		return err == nil && name == "target-a"
	}, 20*time.Second, 200*time.Millisecond, "udp echo from the VIP")

	prxNS.MustExec(t, "ip", "addr", "add", "fd99::1/128", "dev", "lo")
	prxNS.MustExec(t, "ip", "-6", "route", "replace", "2001:db8::1/128", "via", "fd00:1::5")
	local6 := netip.MustParseAddr("fd99::1")
	require.Eventually(t, func() bool {
		name, err := traffic.Ask(ctx, prxNS.Path(), "tcp", local6, netip.MustParseAddrPort("[2001:db8::1]:5000"), labtest.AskTimeout)
		return err == nil && name == "target-a"
	}, 20*time.Second, 200*time.Millisecond, "tcp echo from the IPv6 VIP")
	require.Eventually(t, func() bool {
		name, err := traffic.Ask(ctx, prxNS.Path(), "udp", local6, netip.MustParseAddrPort("[2001:db8::1]:5000"), labtest.AskTimeout)
		return err == nil && name == "target-a"
	}, 20*time.Second, 200*time.Millisecond, "udp echo from the IPv6 VIP")

	// The target leaves: publication withdrawn, interface gone.
	require.NoError(t, tgt.Stop(ctx))
	pubs, err = targetaddrs.Read(pubDir)
	require.NoError(t, err)
	require.Empty(t, pubs)
	_, err = h.LinkByName(targetstub.DefaultInterfaceName)
	require.Error(t, err)

	nse.Stop()
	cp.Stop()
}

// addrsOf returns the addresses of link of family, link-local ones aside.
func addrsOf(t *testing.T, h *netlink.Handle, link netlink.Link, family int) []string {
	t.Helper()
	addrs, err := h.AddrList(link, family)
	require.NoError(t, err)
	var got []string
	for _, a := range addrs {
		if !a.IP.IsLinkLocalUnicast() {
			got = append(got, a.IPNet.String())
		}
	}
	return got
}

// vipRoutes returns the routes of the table that the rule from vip leads to.
func vipRoutes(t *testing.T, h *netlink.Handle, family int, vip string) []netlink.Route {
	t.Helper()
	rules, err := h.RuleList(family)
	require.NoError(t, err)
	table := -1
	for _, r := range rules {
		if r.Src != nil && r.Src.String() == vip {
			table = r.Table
		}
	}
	require.Positive(t, table, "rule from the VIP %s", vip)
	routes, err := h.RouteListFiltered(family, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	return routes
}

// TestRunStoppedWhileConnecting: a target told to stop before the proxy has
// answered (a pod deleted while it starts) stops cleanly: Run returns nil,
// nothing stays published and the echo ports are free again.
func TestRunStoppedWhileConnecting(t *testing.T) {
	bed := labtest.NewBed(t, "tgw", controlplane.Config{})
	pubDir := filepath.Join(bed.Dir, "targets")
	ctx, cancel := context.WithCancel(bed.Ctx)
	done := make(chan error, 1)
	go func() {
		done <- targetstub.Run(ctx, targetstub.Config{
			Name: "target-w", NSMgrURL: bed.CP.NSMgrURL, Service: "no-such.c.t.ns",
			VIPs: []netip.Addr{netip.MustParseAddr("20.0.0.1")}, Port: 5000,
			PublishDir: pubDir, NetNSPath: bed.Stub.Path(), RequestTimeout: time.Second,
		})
	}()
	time.Sleep(2 * time.Second) // a few tries of a service nobody serves
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(labtest.Deadline):
		t.Fatal("Run did not return after its context ended")
	}
	pubs, err := targetaddrs.Read(pubDir)
	require.NoError(t, err)
	require.Empty(t, pubs)
	lc := net.ListenConfig{Control: traffic.Freebind}
	require.NoError(t, netnsdo.DoPath(bed.Stub.Path(), func() error {
		l, err := lc.Listen(context.Background(), "tcp4", "20.0.0.1:5000")
		if err == nil {
			err = l.Close()
		}
		return err
	}), "the echo port on the VIP is free again")
}
