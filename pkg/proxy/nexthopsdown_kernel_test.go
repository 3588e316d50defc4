package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
	"github.com/causeway-net/causeway/pkg/nexthopcheck"
)

// An LB whose datapath breaks (its kernel drops everything, its link stays
// up, NSM sees nothing) leaves the ECMP routes of both families through the
// datapath check and the desired state, and comes back when mended; when
// both LBs are broken, the routes keep their nexthops. The check is wired to
// the proxy as the daemon does (pkg/proxyd/nexthopcheck.go).
func TestKernelBrokenLBLeavesTheRoutes(t *testing.T) {
	ns := testutil.NewNetNS(t, "proxy")
	// What the dataplane is to set in the proxy's namespace
	// (docs/dataplane.md, "Datapath liveness of the LB nexthops").
	ns.MustExec(t, "sysctl", "-qw", "net.ipv4.ping_group_range=0 2147483647")
	p := kernelProxy(t, ns)

	var c *nexthopcheck.Checker
	c, err := nexthopcheck.New(nexthopcheck.Settings{}, nexthopcheck.WithNetNS(ns.Handle), nexthopcheck.WithLogger(testLogger()),
		nexthopcheck.WithOnChange(func([]nexthopcheck.Change) { p.SetNexthopsDown(downPeers(c)) }))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()

	lbs := make([]*testutil.NetNS, 2)
	addrs := make([][]netip.Addr, 2)
	for i := range lbs {
		lbs[i], addrs[i] = addLB(t, p, ns, i)
	}
	bridge := ns.LinkIndex(t, dataplane.DefaultBridgeName)
	var peers []nexthopcheck.Peer
	for _, a := range p.Nexthops() {
		peers = append(peers, nexthopcheck.Peer{Addr: a, LinkIndex: bridge})
	}
	require.Len(t, peers, 4)
	require.NoError(t, c.Watch(peers))

	routes := func() string {
		v4, _ := ns.Exec("ip", "route", "show", "table", "1")
		v6, _ := ns.Exec("ip", "-6", "route", "show", "table", "1")
		return v4 + v6
	}
	has := func(s string, as []netip.Addr) bool {
		for _, a := range as {
			if !strings.Contains(s, "via "+a.String()+" ") {
				return false
			}
		}
		return true
	}
	waitRoutes := func(what string, ok func(string) bool) time.Time {
		t.Helper()
		require.Eventually(t, func() bool { return ok(routes()) }, waitFor, 5*time.Millisecond, "%s:\n%s", what, routes())
		return time.Now()
	}
	waitRoutes("both LBs in both routes", func(s string) bool { return has(s, addrs[0]) && has(s, addrs[1]) })

	lbs[0].MustExec(t, "nft", "add table inet brk; add chain inet brk in { type filter hook input priority 0; }; add rule inet brk in drop")
	start := time.Now()
	at := waitRoutes("LB 0 out of both routes", func(s string) bool {
		return has(s, addrs[1]) && !strings.Contains(s, addrs[0][0].String()) && !strings.Contains(s, addrs[0][1].String())
	})
	t.Logf("FIGURE: a broken LB out of the ECMP routes %v after its datapath broke (defaults)", at.Sub(start).Round(time.Millisecond))

	lbs[1].MustExec(t, "nft", "add table inet brk; add chain inet brk in { type filter hook input priority 0; }; add rule inet brk in drop")
	require.Eventually(t, func() bool { return len(downPeers(c)) == 4 }, waitFor, 5*time.Millisecond, "both LBs found down")
	waitRoutes("both broken: the routes keep both", func(s string) bool { return has(s, addrs[0]) && has(s, addrs[1]) })

	lbs[1].MustExec(t, "nft", "delete table inet brk")
	waitRoutes("LB 1 mended, LB 0 still out", func(s string) bool {
		return has(s, addrs[1]) && !strings.Contains(s, addrs[0][0].String())
	})
	lbs[0].MustExec(t, "nft", "delete table inet brk")
	start = time.Now()
	at = waitRoutes("both back", func(s string) bool { return has(s, addrs[0]) && has(s, addrs[1]) })
	t.Logf("FIGURE: a mended LB back in the ECMP routes %v after (hold-down %v)", at.Sub(start).Round(time.Millisecond), c.Settings().HoldDown)
}

// kernelProxy is a proxy on the real dataplane in ns and the real IPAM
// engine, closed with t.
func kernelProxy(t *testing.T, ns *testutil.NetNS) *Proxy {
	dp, err := dataplane.New(context.Background(), dataplane.Options{NetNS: ns.Handle, Logger: testLogger()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dp.Close()) })
	p, err := New(context.Background(), Config{
		Conduit: "conduit-a", Trench: "trench-a", Node: "worker-1",
		IPAM: serveIPAM(t, ipam.NewServer(realEngine(t, memory.New()))), Dataplane: dp,
		RetryInterval: time.Millisecond, Logger: testLogger(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close(context.Background())) })
	return p
}

// addLB connects LB n: its addresses from the proxy, a namespace of its own
// holding them behind a veth whose proxy end is the LB connection's link.
func addLB(t *testing.T, p *Proxy, ns *testutil.NetNS, n int) (*testutil.NetNS, []netip.Addr) {
	conn := lbConn(fmt.Sprintf("proxy-lb-%d", n))
	require.NoError(t, p.SetIPContext(context.Background(), conn, LBConn))
	lb := testutil.NewNetNS(t, fmt.Sprintf("lb%d", n))
	name := fmt.Sprintf("nsm-lb%d", n)
	ns.MustExec(t, "ip", "link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", lb.Name)
	ns.MustExec(t, "ip", "link", "set", name, "up")
	lb.MustExec(t, "ip", "link", "set", "eth0", "up")
	var out []netip.Addr
	for _, s := range ipcOf(conn).GetDstIpAddrs() {
		lb.MustExec(t, "ip", "addr", "add", s, "dev", "eth0", "nodad")
		out = append(out, netip.MustParsePrefix(s).Addr())
	}
	p.InterfaceCreated(Interface{Index: ns.LinkIndex(t, name), Name: name, Type: LBConn, ConnKey: conn.GetId()})
	return lb, out
}

func downPeers(c *nexthopcheck.Checker) []netip.Addr {
	var out []netip.Addr
	for _, s := range c.Statuses() {
		if s.State == nexthopcheck.Down {
			out = append(out, s.Peer.Addr)
		}
	}
	return out
}
