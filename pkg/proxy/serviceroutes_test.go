package proxy

import (
	"context"
	"net/netip"
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

// TargetAddrs follows the target interfaces; WatchTargets signals changes.
func TestTargetAddrs(t *testing.T) {
	e := newTestEnv(t)
	ch, stop := e.p.WatchTargets()
	defer stop()
	a4, a6 := netip.MustParseAddr("172.16.0.2"), netip.MustParseAddr("fd00::2")
	vip := netip.MustParseAddr("20.0.0.1")
	e.p.InterfaceCreated(Interface{Index: 7, Name: "t1", Type: TargetConn, ConnID: "c1", NeighborAddrs: []netip.Addr{a6, vip, a4}})
	e.p.InterfaceCreated(Interface{Index: 8, Name: "lb", Type: LBConn, ConnID: "c2", NeighborAddrs: []netip.Addr{netip.MustParseAddr("172.16.0.9")}})
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no signal")
	}
	require.Equal(t, []netip.Addr{a4, a6}, e.p.TargetAddrs(), "the addresses of the bridge subnets, not the VIP")
	e.p.InterfaceDeleted(Interface{Index: 7})
	require.Empty(t, e.p.TargetAddrs())
}
