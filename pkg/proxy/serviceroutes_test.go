package proxy

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
)

func routeStrings(rs []*networkservice.Route) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.GetPrefix()+" via "+r.GetNextHop())
	}
	return out
}

// A target's IP context carries a route per service prefix via its gateway
// of the family; its own routes stay; a change of prefixes replaces ours at
// the next refresh; LB connections get none.
func TestServiceRoutes(t *testing.T) {
	e := newTestEnv(t)
	e.p.SetServicePrefixes([]netip.Prefix{netip.MustParsePrefix("10.96.0.0/24"), netip.MustParsePrefix("fd00:96::/112")})
	conn := targetConn("target-1")
	own := &networkservice.Route{Prefix: "192.0.2.0/24", NextHop: "198.51.100.1"}
	conn.Context = &networkservice.ConnectionContext{IpContext: &networkservice.IPContext{SrcRoutes: []*networkservice.Route{own}}}
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))
	require.Equal(t, []string{"192.0.2.0/24 via 198.51.100.1", "10.96.0.0/24 via 172.16.0.1", "fd00:96::/112 via fd00::1"},
		routeStrings(ipcOf(conn).GetSrcRoutes()))

	e.p.SetServicePrefixes([]netip.Prefix{netip.MustParsePrefix("10.97.0.1/32")})
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))
	require.Equal(t, []string{"192.0.2.0/24 via 198.51.100.1", "10.97.0.1/32 via 172.16.0.1"}, routeStrings(ipcOf(conn).GetSrcRoutes()))

	e.p.SetServicePrefixes(nil)
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))
	require.Equal(t, []string{"192.0.2.0/24 via 198.51.100.1"}, routeStrings(ipcOf(conn).GetSrcRoutes()))

	e.p.SetServicePrefixes([]netip.Prefix{netip.MustParsePrefix("10.96.0.0/24")})
	lb := lbConn("lb-1")
	require.NoError(t, e.p.SetIPContext(context.Background(), lb, LBConn))
	require.Empty(t, ipcOf(lb).GetSrcRoutes())
}

// Held (the prefixes are not known: a restart with a broken services
// file), a target keeps the service routes its request carries, moved to
// its current gateway; a target that carries none gets none; the next
// SetServicePrefixes ends the hold.
func TestHeldServiceRoutes(t *testing.T) {
	e := newTestEnv(t)
	e.p.HoldServiceRoutes()
	healed := targetConn("target-1")
	// As an earlier run wrote it, with another gateway (172.16.9.1/24).
	healed.Context = &networkservice.ConnectionContext{IpContext: &networkservice.IPContext{
		ExtraPrefixes: []string{"172.16.9.1/24"},
		SrcRoutes: []*networkservice.Route{
			{Prefix: "10.96.0.0/24", NextHop: "172.16.9.1"},
			{Prefix: "192.0.2.0/24", NextHop: "198.51.100.1"},
			{Prefix: "10.96.0.0/24", NextHop: "172.16.9.1"},
			{Prefix: "fd00:96::/112", NextHop: "fd00::1"},
		},
	}}
	require.NoError(t, e.p.SetIPContext(context.Background(), healed, TargetConn))
	require.Equal(t, []string{"192.0.2.0/24 via 198.51.100.1", "10.96.0.0/24 via 172.16.0.1", "fd00:96::/112 via fd00::1"},
		routeStrings(ipcOf(healed).GetSrcRoutes()), "kept once each, via the current gateways")

	fresh := targetConn("target-2")
	require.NoError(t, e.p.SetIPContext(context.Background(), fresh, TargetConn))
	require.Empty(t, ipcOf(fresh).GetSrcRoutes(), "nothing to keep")

	e.p.SetServicePrefixes([]netip.Prefix{netip.MustParsePrefix("10.97.0.0/24")})
	for _, c := range []*networkservice.Connection{healed, fresh} {
		require.NoError(t, e.p.SetIPContext(context.Background(), c, TargetConn))
	}
	require.Equal(t, []string{"192.0.2.0/24 via 198.51.100.1", "10.97.0.0/24 via 172.16.0.1"}, routeStrings(ipcOf(healed).GetSrcRoutes()))
	require.Equal(t, []string{"10.97.0.0/24 via 172.16.0.1"}, routeStrings(ipcOf(fresh).GetSrcRoutes()))
}

// TargetAddrs follows the target interfaces (the target-side addresses
// the proxy handed out, of the targets whose link is a port; never an LB's);
// WatchTargets signals changes.
func TestTargetAddrs(t *testing.T) {
	e := newTestEnv(t)
	ch, stop := e.p.WatchTargets()
	defer stop()
	t1 := targetConn("t1")
	e.link(t, t1, TargetConn, 7)
	e.link(t, lbConn("lb1"), LBConn, 8)
	require.NoError(t, e.p.SetIPContext(context.Background(), targetConn("t2"), TargetConn)) // no link yet
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatal("no signal")
	}
	var want []netip.Addr
	for _, s := range ipcOf(t1).GetSrcIpAddrs() {
		want = append(want, netip.MustParsePrefix(s).Addr())
	}
	require.Len(t, want, 2, "one address per family")
	slices.SortFunc(want, netip.Addr.Compare)
	require.Equal(t, want, e.p.TargetAddrs(), "the linked target's own addresses only")
	e.p.InterfaceDeleted(Interface{Index: 7})
	require.Empty(t, e.p.TargetAddrs())
}

// Targets names each open target connection's pod from its labels, with
// its addresses and whether its link is a port; a close takes it out at
// once (its addresses wait for their release) and signals.
func TestTargetsCarryTheirPod(t *testing.T) {
	e := newTestEnv(t)
	ch, stop := e.p.WatchTargets()
	defer stop()
	t1 := targetConn("t1")
	t1.Labels = map[string]string{PodNameLabel: "web-0", NodeNameLabel: "node-a", "other": "x"}
	e.link(t, t1, TargetConn, 7)
	e.link(t, lbConn("lb1"), LBConn, 8)
	require.NoError(t, e.p.SetIPContext(context.Background(), targetConn("t2"), TargetConn)) // no link, no labels
	got := e.p.Targets()
	require.Len(t, got, 2, "targets only, never an LB")
	require.Equal(t, "t1", got[0].Key)
	require.Equal(t, ClientInfo{Pod: "web-0", Node: "node-a"}, got[0].Client)
	require.True(t, got[0].Linked)
	require.Len(t, got[0].Addrs, 2, "one address per family")
	require.Equal(t, ipcOf(t1).GetSrcIpAddrs()[0], netip.PrefixFrom(got[0].Addrs[0], 24).String())
	require.Equal(t, ClientInfo{}, got[1].Client)
	require.False(t, got[1].Linked)

	for len(ch) > 0 {
		<-ch
	}
	require.NoError(t, e.p.UnsetIPContext(context.Background(), t1, TargetConn))
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatal("no signal at the close")
	}
	got = e.p.Targets()
	require.Len(t, got, 1)
	require.Equal(t, "t2", got[0].Key)
}
