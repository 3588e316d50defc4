package proxy

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestInterfaceEventsDriveDataplane(t *testing.T) {
	e := newTestEnv(t)
	e.p.InterfaceCreated(Interface{Index: 7, Name: "tgt-1", Type: TargetConn, ConnID: "t1",
		LocalAddrs: []netip.Prefix{netip.MustParsePrefix("172.16.0.3/24")}, NeighborAddrs: addrs("172.16.0.2")})
	e.p.InterfaceCreated(Interface{Index: 9, Name: "lb-1", Type: LBConn, ConnID: "lb1",
		NeighborAddrs: addrs("172.16.0.5", "fd00::5")})
	e.p.InterfaceCreated(Interface{Index: 8, Name: "lb-2", Type: LBConn, ConnID: "lb2",
		NeighborAddrs: addrs("172.16.0.7")})
	s := e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Ports) == 3 })
	require.Equal(t, []int{7, 8, 9}, s.Ports)
	// Target neighbours are not nexthops.
	require.Equal(t, "[172.16.0.5 172.16.0.7 fd00::5]", sprint(s.Nexthops))
	require.Equal(t, "[172.16.0.1/24 fd00::1/64]", sprint(s.BridgeAddrs))
	// Each LB address is tied to its port.
	require.Equal(t, map[netip.Addr]int{
		netip.MustParseAddr("172.16.0.5"): 9, netip.MustParseAddr("fd00::5"): 9, netip.MustParseAddr("172.16.0.7"): 8,
	}, s.NexthopPorts)

	// A kernel delete knows only the index: port and nexthops go.
	e.p.InterfaceDeleted(Interface{Index: 9})
	s = e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Ports) == 2 })
	require.Equal(t, []int{7, 8}, s.Ports)
	require.Equal(t, "[172.16.0.7]", sprint(s.Nexthops))

	st := e.p.Stats()
	require.Equal(t, 2, st.Ports)
	require.Equal(t, 1, st.Nexthops)
}

func TestInterfaceEventsDuplicatesAndDisorder(t *testing.T) {
	e := newTestEnv(t)
	lb1 := Interface{Index: 10, Name: "lb-1", Type: LBConn, ConnID: "lb1", NeighborAddrs: addrs("172.16.0.5")}
	lb2 := Interface{Index: 11, Name: "lb-2", Type: LBConn, ConnID: "lb2", NeighborAddrs: addrs("172.16.0.5")}

	// Delete before create, of something never seen: nothing happens.
	e.p.InterfaceDeleted(Interface{Index: 42})
	// Double create (client and server monitors both report it).
	e.p.InterfaceCreated(lb1)
	e.p.InterfaceCreated(lb1)
	// Two interfaces toward the same LB address: one nexthop.
	e.p.InterfaceCreated(lb2)
	s := e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Ports) == 2 })
	require.Equal(t, "[172.16.0.5]", sprint(s.Nexthops))
	require.Empty(t, s.NexthopPorts, "an address behind two ports is not tied to either")

	// The NSM close reports the delete with metadata, then the kernel with
	// the index only: one removal. The nexthop stays while lb2 has it.
	e.p.InterfaceDeleted(lb1)
	e.p.InterfaceDeleted(Interface{Index: 10})
	s = e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Ports) == 1 })
	require.Equal(t, []int{11}, s.Ports)
	require.Equal(t, "[172.16.0.5]", sprint(s.Nexthops))
	require.Equal(t, map[netip.Addr]int{netip.MustParseAddr("172.16.0.5"): 11}, s.NexthopPorts)

	// A refresh that changes lb2's addresses, as a create replacing the
	// first, or as the interface monitor announces it: a delete, then a
	// create of the same link.
	lb2.NeighborAddrs = addrs("172.16.0.6")
	e.p.InterfaceCreated(lb2)
	s = e.dp.waitState(t, func(s dataplaneState) bool { return sprint(s.Nexthops) == "[172.16.0.6]" })
	require.Equal(t, []int{11}, s.Ports)
	e.p.InterfaceDeleted(lb2)
	lb2.NeighborAddrs = addrs("172.16.0.8")
	e.p.InterfaceCreated(lb2)
	s = e.dp.waitState(t, func(s dataplaneState) bool { return sprint(s.Nexthops) == "[172.16.0.8]" })
	require.Equal(t, []int{11}, s.Ports)

	// Events without an index or with an unknown type are ignored.
	e.p.InterfaceCreated(Interface{Name: "x", Type: LBConn, NeighborAddrs: addrs("1.1.1.1")})
	e.p.InterfaceCreated(Interface{Index: 3, Name: "x", Type: ConnType(9)})
	e.p.InterfaceDeleted(Interface{Name: "lb-2"})
	require.Equal(t, 1, e.p.Stats().Ports)
	require.Equal(t, []int{11}, e.p.Snapshot().State.Ports)
}
