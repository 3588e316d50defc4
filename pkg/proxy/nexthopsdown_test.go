package proxy

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRoutedNexthopsNeverEmptiesAFamily(t *testing.T) {
	hops := addrs("10.0.0.2", "10.0.0.3", "fd00::2", "fd00::3")
	down := func(ss ...string) map[netip.Addr]bool {
		m := map[netip.Addr]bool{}
		for _, a := range addrs(ss...) {
			m[a] = true
		}
		return m
	}
	require.Equal(t, hops, routedNexthops(hops, nil))
	require.Equal(t, hops, routedNexthops(hops, down("10.0.0.9")), "nothing of ours is down")
	require.Equal(t, addrs("10.0.0.3", "fd00::2", "fd00::3"), routedNexthops(hops, down("10.0.0.2")))
	require.Equal(t, addrs("10.0.0.2", "10.0.0.3", "fd00::3"), routedNexthops(hops, down("10.0.0.2", "10.0.0.3", "fd00::2")),
		"every IPv4 nexthop down: all kept; IPv6 loses its down one")
	require.Equal(t, hops, routedNexthops(hops, down("10.0.0.2", "10.0.0.3", "fd00::2", "fd00::3")))
}

// A nexthop found down leaves the desired state and comes back with its
// return; the last one of a family stays.
func TestNexthopsDownLeaveTheDesiredState(t *testing.T) {
	e := newTestEnv(t)
	lb1, lb2 := lbConn("lb1"), lbConn("lb2")
	e.link(t, lb1, LBConn, 9)
	e.link(t, lb2, LBConn, 8)
	e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Nexthops) == 4 })
	hops1, hops2 := lbSide(t, lb1), lbSide(t, lb2)
	require.ElementsMatch(t, append(append([]netip.Addr{}, hops1...), hops2...), e.p.Nexthops())

	e.p.SetNexthopsDown(hops1[:1]) // lb1's IPv4 address
	s := e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Nexthops) == 3 })
	require.NotContains(t, s.Nexthops, hops1[0])
	require.Len(t, e.p.Nexthops(), 4, "the model keeps it")

	e.p.SetNexthopsDown([]netip.Addr{hops1[0], hops2[0]}) // both IPv4 nexthops
	s = e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Nexthops) == 4 })
	require.ElementsMatch(t, append(append([]netip.Addr{}, hops1...), hops2...), s.Nexthops)

	e.p.SetNexthopsDown(nil)
	e.p.SetNexthopsDown(hops2[1:]) // lb2's IPv6 address
	s = e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Nexthops) == 3 })
	require.NotContains(t, s.Nexthops, hops2[1])
	e.p.SetNexthopsDown(nil)
	e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Nexthops) == 4 })
}
