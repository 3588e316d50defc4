package dataplane

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
)

// A load balancer that comes back on a new port with its old address must
// not be reached through the MAC its previous interface had.
func TestMovedNexthopForgetsNeighbor(t *testing.T) {
	ns := testutil.NewNetNS(t, "dpneigh")
	dp := newDP(t, ns, Options{AnnounceCount: -1})
	p1 := vethPair(t, ns, "lb1", nil, "lb1p")
	lb4, lb6 := ma("10.77.0.2"), ma("fd77::2")
	other := ma("10.77.0.3")
	// The nexthops are tied to port; ports are the bridge's ports. The old
	// port stays in the bridge after the move, so that the bridge keeps its
	// carrier: a bridge without ports loses it, and the kernel then flushes
	// its neighbour entries by itself, which would hide whether we did.
	state := func(port int, ports ...int) State {
		return State{
			BridgeAddrs: []netip.Prefix{mp("10.77.0.1/24"), mp("fd77::1/64")},
			Ports:       tiedPorts(portsOf(ports...), map[netip.Addr]int{lb4: port, lb6: port, other: port}),
			Nexthops:    []netip.Addr{lb4, lb6, other},
		}
	}
	require.NoError(t, dp.Apply(state(p1, p1)))
	neigh := func(addr string) string {
		return strings.TrimSpace(ns.MustExec(t, "ip", "neigh", "show", addr, "dev", DefaultBridgeName))
	}
	ns.MustExec(t, "ip", "neigh", "replace", lb4.String(), "lladdr", "02:00:00:00:00:01", "dev", DefaultBridgeName, "nud", "reachable")
	ns.MustExec(t, "ip", "neigh", "replace", lb6.String(), "lladdr", "02:00:00:00:00:01", "dev", DefaultBridgeName, "nud", "stale")
	ns.MustExec(t, "ip", "neigh", "replace", other.String(), "lladdr", "02:00:00:00:00:03", "dev", DefaultBridgeName, "nud", "permanent")

	// The same state again: the entries stay.
	require.NoError(t, dp.Apply(state(p1, p1)))
	require.Contains(t, neigh(lb4.String()), "02:00:00:00:00:01")
	require.Contains(t, neigh(lb6.String()), "02:00:00:00:00:01")
	require.Zero(t, dp.Stats().NeighborsForgotten)

	// The LBs come back on a new port: their dynamic entries go, an
	// administrator's permanent entry stays.
	p2 := vethPair(t, ns, "lb2", nil, "lb2p")
	require.NoError(t, dp.Apply(state(p2, p1, p2)))
	require.Empty(t, neigh(lb4.String()))
	require.Empty(t, neigh(lb6.String()))
	require.Contains(t, neigh(other.String()), "PERMANENT")
	require.EqualValues(t, 2, dp.Stats().NeighborsForgotten)
}
