package lab_test

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/networkservicemesh/sdk/pkg/networkservice/common/retry"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/lab/labtest"
	"github.com/causeway-net/causeway/pkg/lab/lbstub"
	"github.com/causeway-net/causeway/pkg/lab/targetstub"
	"github.com/causeway-net/causeway/pkg/lab/topo"
	"github.com/causeway-net/causeway/pkg/lab/traffic"
	"github.com/causeway-net/causeway/pkg/nsm/chain/ipcontext"
	"github.com/causeway-net/causeway/pkg/nsm/chain/ipcontext/ipcontextfake"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
	"github.com/causeway-net/causeway/pkg/proxy"
)

// enslave puts every veth of the proxy namespace on bridge0 until ctx ends,
// as the proxy does with the interfaces the forwarder creates.
func enslave(ctx context.Context, wg *sync.WaitGroup, ns *testutil.NetNS) {
	defer wg.Done()
	h, err := netlink.NewHandleAt(ns.Handle)
	if err != nil {
		return
	}
	defer h.Close()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if br, err := h.LinkByName("bridge0"); err == nil {
			links, _ := h.LinkList()
			for _, l := range links {
				if l.Type() == "veth" && l.Attrs().MasterIndex == 0 {
					_ = h.LinkSetMaster(l, br)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// TestDataPath assembles the lab's data path with a stand-in for the proxy
// (a bridge, the egress rule and an NSE/NSC pair of fake address handling):
// an external host reaches the VIP through two LB stubs, both target stubs
// answer, their replies leave through the proxy's egress route, and a target
// that leaves stops getting traffic.
func TestDataPath(t *testing.T) {
	prx := testutil.NewNetNS(t, "prx")
	lba := testutil.NewNetNS(t, "lba")
	lbb := testutil.NewNetNS(t, "lbb")
	ext := testutil.NewNetNS(t, "ext")
	t1 := testutil.NewNetNS(t, "t1")
	t2 := testutil.NewNetNS(t, "t2")
	dir := t.TempDir()
	targets := filepath.Join(dir, "targets")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ns := range []*testutil.NetNS{prx, ext, t1, t2} {
		require.NoError(t, topo.ApplySysctls(ns.Path(), topo.RouterSysctls))
	}

	cp, err := controlplane.Start(ctx, controlplane.Config{Dir: dir})
	require.NoError(t, err)
	defer cp.Stop()

	// The proxy stand-in: bridge, NSE for targets, egress rule.
	// A fixed MAC, as the proxy sets: a bridge that takes its ports' lowest
	// MAC changes address when that port leaves, and the targets keep
	// sending to the old one until their neighbour entry expires.
	prx.MustExec(t, "ip", "link", "add", "bridge0", "address", "02:ca:fe:00:00:01", "type", "bridge")
	prx.MustExec(t, "ip", "addr", "add", "172.16.1.1/24", "dev", "bridge0")
	prx.MustExec(t, "ip", "link", "set", "bridge0", "up")
	bctx, bcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go enslave(bctx, &wg, prx)
	defer func() { bcancel(); wg.Wait() }()
	nse, err := controlplane.StartEndpoint(ctx, controlplane.EndpointConfig{
		Name: "proxy-a", Service: "proxy.c.t.ns", NSMgrURL: cp.NSMgrURL,
		SocketPath: filepath.Join(dir, "proxy.sock"), NetNSPath: prx.Path(),
		Elements: []networkservice.NetworkServiceServer{ipcontext.NewServer(&ipcontextfake.Setter{
			Type: proxy.TargetConn, Subnet: netip.MustParsePrefix("172.16.1.0/24"), First: 10, Gateways: []string{"172.16.1.1/24"},
		})},
	})
	require.NoError(t, err)
	defer nse.Stop()

	vip := netip.MustParseAddr("20.0.0.1")
	client := netip.MustParseAddr("192.168.100.1")
	for i, lb := range []struct {
		ns   *testutil.NetNS
		name string
	}{{lba, "lb-a"}, {lbb, "lb-b"}} {
		extLB := netip.MustParsePrefix(fmt.Sprintf("10.0.%d.1/24", i))
		extHost := netip.MustParsePrefix(fmt.Sprintf("10.0.%d.2/24", i))
		require.NoError(t, topo.AddVeth(
			topo.VethEnd{NetNSPath: lb.ns.Path(), Name: "ext0", Addrs: []netip.Prefix{extLB}},
			topo.VethEnd{NetNSPath: ext.Path(), Name: "to-" + lb.name, Addrs: []netip.Prefix{extHost}}))
		l, err := lbstub.Start(ctx, lbstub.Config{
			Name: lb.name, NSMgrURL: cp.NSMgrURL, Service: "c.t.ns", SocketPath: filepath.Join(dir, lb.name+".sock"),
			NetNSPath: lb.ns.Path(), VIPs: []netip.Addr{vip}, TargetsDir: targets,
			Routes: []lbstub.Route{{Dst: netip.PrefixFrom(client, 32), Via: extHost.Addr()}},
		})
		require.NoError(t, err)
		defer l.Stop()

		// The proxy is the LB's NSC and assigns both ends.
		pctx, pcancel := context.WithCancel(ctx)
		defer pcancel()
		nsc := retry.NewClient(controlplane.NewClient(pctx, controlplane.ClientConfig{
			Name: "proxy-a-" + lb.name, NSMgrURL: cp.NSMgrURL, InterfaceName: lb.name, NetNSPath: prx.Path(),
		}), retry.WithTryTimeout(10*time.Second), retry.WithInterval(200*time.Millisecond))
		conn, err := nsc.Request(ctx, &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{
			Id: "proxy-a-" + lb.name, NetworkService: "c.t.ns", NetworkServiceEndpointName: lb.name,
			Context: &networkservice.ConnectionContext{IpContext: &networkservice.IPContext{
				SrcIpAddrs: []string{fmt.Sprintf("172.16.1.%d/24", 2+2*i)},
				DstIpAddrs: []string{fmt.Sprintf("172.16.1.%d/24", 3+2*i)},
			}},
		}})
		require.NoError(t, err)
		defer func() { _, _ = nsc.Close(context.Background(), conn) }()
	}
	prx.MustExec(t, "ip", "rule", "add", "from", "20.0.0.1", "lookup", "100")
	prx.MustExec(t, "ip", "route", "add", "default", "table", "100",
		"nexthop", "via", "172.16.1.3", "dev", "bridge0", "nexthop", "via", "172.16.1.5", "dev", "bridge0")
	ext.MustExec(t, "ip", "addr", "add", "192.168.100.1/32", "dev", "lo")
	require.NoError(t, topo.AddRoute(ext.Path(), netip.PrefixFrom(vip, 32),
		netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.1.1")))

	var stubs []*targetstub.Target
	for _, tg := range []struct {
		ns   *testutil.NetNS
		name string
	}{{t1, "target-1"}, {t2, "target-2"}} {
		s, err := targetstub.Start(ctx, targetstub.Config{
			Name: tg.name, NSMgrURL: cp.NSMgrURL, Service: "proxy.c.t.ns", VIPs: []netip.Addr{vip},
			Port: 5000, PublishDir: targets, NetNSPath: tg.ns.Path(),
		})
		require.NoError(t, err)
		defer func() { _ = s.Stop(context.Background()) }()
		stubs = append(stubs, s)
	}

	t.Log("topology up", time.Now().Format("05.000"))
	// Both targets answer; with per-flow hashing 30 connections reach both.
	require.Eventually(t, func() bool {
		seen := map[string]bool{}
		for range 30 {
			name, err := traffic.Ask(ctx, ext.Path(), "tcp", client, netip.MustParseAddrPort("20.0.0.1:5000"), labtest.AskTimeout)
			if err != nil {
				t.Log(err)
				return false
			}
			seen[name] = true
		}
		return seen["target-1"] && seen["target-2"]
	}, 60*time.Second, 500*time.Millisecond, "external host reaches both targets over TCP")
	require.Eventually(t, func() bool {
		name, err := traffic.Ask(ctx, ext.Path(), "udp", client, netip.MustParseAddrPort("20.0.0.1:5000"), labtest.AskTimeout)
		return err == nil && strings.HasPrefix(name, "target-")
	}, 20*time.Second, 200*time.Millisecond, "UDP answer from a target")

	t.Log("both targets answered", time.Now().Format("05.000"))
	// target-1 leaves: every new connection lands on target-2.
	require.NoError(t, stubs[0].Stop(ctx))
	t.Log("target-1 stopped", time.Now().Format("05.000"))
	require.Eventually(t, func() bool {
		for range 10 {
			name, err := traffic.Ask(ctx, ext.Path(), "tcp", client, netip.MustParseAddrPort("20.0.0.1:5000"), labtest.AskTimeout)
			if err != nil || name != "target-2" {
				t.Log(time.Now().Format("05.000"), name, err)
				return false
			}
		}
		return true
	}, 60*time.Second, 500*time.Millisecond, "only target-2 after target-1 left")
	t.Log("only target-2", time.Now().Format("05.000"))
	t.Cleanup(func() { t.Log("cleanup done", time.Now().Format("05.000")) })
}
