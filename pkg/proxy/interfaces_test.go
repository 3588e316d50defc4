package proxy

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/dataplane"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// lbSide is the LB's end of an LB connection the proxy set up: the
// "-src" addresses, which it wrote into the IP context's Dst side.
func lbSide(t *testing.T, conn *networkservice.Connection) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	for _, s := range ipcOf(conn).GetDstIpAddrs() {
		out = append(out, netip.MustParsePrefix(s).Addr())
	}
	return out
}

// link sets up conn and announces its link, as the link matcher does.
func (e *testEnv) link(t *testing.T, conn *networkservice.Connection, typ ConnType, index int) {
	t.Helper()
	require.NoError(t, e.p.SetIPContext(t.Context(), conn, typ))
	key, err := ConnKey(conn, typ)
	require.NoError(t, err)
	e.p.InterfaceCreated(Interface{Index: index, Name: key, Type: typ, ConnKey: key})
}

// moveChild makes the fake IPAM answer another address for the child
// name of family f: its address is released and taken by another child.
func (e *testEnv) moveChild(t *testing.T, f ipamv1.IPFamily, name string) {
	t.Helper()
	_, err := e.ipam.Release(t.Context(), &ipamv1.Child{Name: name, Subnet: e.p.subnets[f]})
	require.NoError(t, err)
	_, err = e.ipam.Allocate(t.Context(), &ipamv1.Child{Name: name + "-squatter", Subnet: e.p.subnets[f]})
	require.NoError(t, err)
}

func TestInterfaceEventsDriveDataplane(t *testing.T) {
	e := newTestEnv(t)
	lb1, lb2 := lbConn("lb1"), lbConn("lb2")
	e.link(t, targetConn("t1"), TargetConn, 7)
	e.link(t, lb1, LBConn, 9)
	e.link(t, lb2, LBConn, 8)
	s := e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Ports) == 3 && len(s.Nexthops) == 4 })
	require.Equal(t, []int{7, 8, 9}, indexes(s.Ports))
	// Target neighbours are not nexthops: the LBs' own addresses are, from
	// the proxy's allocations.
	hops1, hops2 := lbSide(t, lb1), lbSide(t, lb2)
	require.ElementsMatch(t, append(append([]netip.Addr{}, hops1...), hops2...), s.Nexthops)
	require.Equal(t, "[172.16.0.1/24 fd00::1/64]", sprint(s.BridgeAddrs))
	// Each LB address is tied to its port.
	require.Equal(t, map[netip.Addr]int{hops1[0]: 9, hops1[1]: 9, hops2[0]: 8, hops2[1]: 8}, nexthopPorts(s))

	// A kernel delete knows only the index: port and nexthops go.
	e.p.InterfaceDeleted(Interface{Index: 9})
	s = e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Ports) == 2 })
	require.Equal(t, []int{7, 8}, indexes(s.Ports))
	require.Equal(t, hops2, s.Nexthops)

	st := e.p.Stats()
	require.Equal(t, 2, st.Ports)
	require.Equal(t, 2, st.Nexthops)
}

func TestInterfaceEventsDuplicatesAndDisorder(t *testing.T) {
	e := newTestEnv(t)
	lb1, lb2 := lbConn("lb1"), lbConn("lb2")

	// Delete before create, of something never seen: nothing happens.
	e.p.InterfaceDeleted(Interface{Index: 42})
	// Double create (client and server monitors both report it).
	e.link(t, lb1, LBConn, 10)
	e.p.InterfaceCreated(Interface{Index: 10, Name: "lb1", Type: LBConn, ConnKey: "lb1"})
	e.link(t, lb2, LBConn, 11)
	s := e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Ports) == 2 && len(s.Nexthops) == 4 })
	require.Equal(t, []int{10, 11}, indexes(s.Ports))

	// The NSM close reports the delete with metadata, then the kernel with
	// the index only: one removal.
	e.p.InterfaceDeleted(Interface{Index: 10, Name: "lb1", Type: LBConn, ConnKey: "lb1"})
	e.p.InterfaceDeleted(Interface{Index: 10})
	s = e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Ports) == 1 })
	require.Equal(t, []int{11}, indexes(s.Ports))
	require.Equal(t, lbSide(t, lb2), s.Nexthops)

	// A refresh that changes lb2's addresses (the IPAM answers others)
	// moves its nexthops: the proxy follows its own allocations, nothing
	// is parsed back from the IP context.
	old := lbSide(t, lb2)
	e.moveChild(t, ipamv1.IPFamily_IPV4, "lb2-src")
	require.NoError(t, e.p.SetIPContext(t.Context(), lb2, LBConn))
	moved := lbSide(t, lb2)
	require.NotEqual(t, old[0], moved[0])
	s = e.dp.waitState(t, func(s dataplaneState) bool { return sprint(s.Nexthops) == sprint(moved) })
	require.Equal(t, []int{11}, indexes(s.Ports))
	require.Equal(t, map[netip.Addr]int{moved[0]: 11, moved[1]: 11}, nexthopPorts(s))

	// A heal that moves lb2 to another link: the old port goes.
	e.p.InterfaceCreated(Interface{Index: 12, Name: "lb2b", Type: LBConn, ConnKey: "lb2"})
	s = e.dp.waitState(t, func(s dataplaneState) bool { return sprint(indexes(s.Ports)) == "[12]" })
	require.Equal(t, map[netip.Addr]int{moved[0]: 12, moved[1]: 12}, nexthopPorts(s))

	// Events without an index, a connection or with an unknown type are
	// ignored.
	e.p.InterfaceCreated(Interface{Name: "x", Type: LBConn, ConnKey: "lb2"})
	e.p.InterfaceCreated(Interface{Index: 3, Name: "x", Type: LBConn})
	e.p.InterfaceCreated(Interface{Index: 3, Name: "x", Type: ConnType(9), ConnKey: "lb2"})
	e.p.InterfaceDeleted(Interface{Name: "lb2b"})
	require.Equal(t, 1, e.p.Stats().Ports)
	require.Equal(t, []int{12}, indexes(e.p.Snapshot().State.Ports))
}

// A target's link announced before its addresses are known is a port at
// once; its addresses, when set, change nothing in the dataplane state.
func TestLinkBeforeIPContext(t *testing.T) {
	e := newTestEnv(t)
	e.p.InterfaceCreated(Interface{Index: 5, Name: "nsm-t", Type: TargetConn, ConnKey: "t1"})
	e.dp.waitState(t, func(s dataplaneState) bool { return sprint(indexes(s.Ports)) == "[5]" })
	require.NoError(t, e.p.SetIPContext(t.Context(), targetConn("t1"), TargetConn))
	require.Equal(t, 1, e.p.Stats().Connections)
	e.p.InterfaceDeleted(Interface{Index: 5})
	e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Ports) == 0 })
	require.Equal(t, 1, e.p.Stats().Connections, "the addresses stay until the connection closes")
}

// An address announced on two ports is a nexthop tied to neither; once one
// port goes it is tied to the other.
func TestPortsAndHopsNexthopOnTwoPorts(t *testing.T) {
	d := newPortsAndHops()
	a := netip.MustParseAddr("172.16.0.5")
	d.addPort(10, false, nil, nil)
	d.addPort(11, false, nil, nil)
	d.addHop(a, 10)
	d.addHop(a, 11)
	d.addHop(a, 11)
	s := d.state(nil, nil)
	require.Equal(t, []netip.Addr{a}, s.Nexthops)
	require.Empty(t, nexthopPorts(s), "an address behind two ports is not tied to either")
	d.removeHop(a, 10)
	d.removePort(10)
	s = d.state(nil, nil)
	require.Equal(t, []int{11}, indexes(s.Ports))
	require.Equal(t, map[netip.Addr]int{a: 11}, nexthopPorts(s))
	d.removeHop(a, 11)
	require.Empty(t, d.state(nil, nil).Nexthops)
}

// The slices of a State handed to the dataplane never change afterwards.
func TestPortsAndHopsStateIsNotChangedByLaterEvents(t *testing.T) {
	d := newPortsAndHops()
	for _, i := range []int{3, 1, 2} {
		d.addPort(i, true, nil, nil)
	}
	d.addHop(netip.MustParseAddr("10.0.0.2"), 1)
	s := d.state(nil, nil)
	d.addPort(0, false, nil, nil)
	d.removePort(2)
	d.addHop(netip.MustParseAddr("10.0.0.1"), 3)
	d.removeHop(netip.MustParseAddr("10.0.0.2"), 1)
	d.setHairpin(true, []int{1, 3})
	require.Equal(t, []dataplane.Port{{Index: 1, Nexthops: []netip.Addr{netip.MustParseAddr("10.0.0.2")}}, {Index: 2}, {Index: 3}}, s.Ports)
	require.Equal(t, "[10.0.0.2]", sprint(s.Nexthops))
	require.Equal(t, []dataplane.Port{{Index: 0}, {Index: 1, Hairpin: true}, {Index: 3, Hairpin: true, Nexthops: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}}, d.ports)
}

// The targets' ports, and only theirs, are in hairpin mode while the
// service load balancer asks for it.
func TestTargetHairpin(t *testing.T) {
	e := newTestEnv(t)
	e.link(t, targetConn("t1"), TargetConn, 7)
	e.link(t, lbConn("lb1"), LBConn, 9)
	e.link(t, targetConn("t2"), TargetConn, 5)
	s := e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Ports) == 3 })
	require.Empty(t, hairpinPorts(s), "off until asked")
	e.p.SetTargetHairpin(true)
	e.dp.waitState(t, func(s dataplaneState) bool { return slices.Equal(hairpinPorts(s), []int{5, 7}) })
	e.p.InterfaceDeleted(Interface{Index: 7})
	e.dp.waitState(t, func(s dataplaneState) bool { return slices.Equal(hairpinPorts(s), []int{5}) })
	e.link(t, targetConn("t3"), TargetConn, 11)
	e.dp.waitState(t, func(s dataplaneState) bool { return slices.Equal(hairpinPorts(s), []int{5, 11}) })
	e.p.SetTargetHairpin(false)
	e.dp.waitState(t, func(s dataplaneState) bool { return len(hairpinPorts(s)) == 0 && len(s.Ports) == 3 })
	e.p.SetTargetHairpin(true)
	e.dp.waitState(t, func(s dataplaneState) bool { return slices.Equal(hairpinPorts(s), []int{5, 11}) })
}

// A target's port is held to the target's own addresses (a port
// attribute), an LB's is not; a refresh that changes the target's
// addresses changes its filter at once; PortFilterOff filters nothing.
func TestTargetPortFilter(t *testing.T) {
	e := newTestEnv(t)
	target := targetConn("t1")
	e.link(t, target, TargetConn, 7)
	e.link(t, lbConn("lb1"), LBConn, 9)
	s := e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Ports) == 2 })
	own := e.p.TargetAddrs()
	require.Len(t, own, 2)
	require.Equal(t, &dataplane.PortFilter{Addrs: own}, s.Ports[0].Filter, "the target's port")
	require.Nil(t, s.Ports[1].Filter, "not the LB's")

	e.moveChild(t, ipamv1.IPFamily_IPV4, "t1-src")
	require.NoError(t, e.p.SetIPContext(t.Context(), target, TargetConn))
	moved := e.p.TargetAddrs()
	require.NotEqual(t, own, moved)
	e.dp.waitState(t, func(s dataplaneState) bool {
		return len(s.Ports) == 2 && s.Ports[0].Filter != nil && sprint(s.Ports[0].Filter.Addrs) == sprint(moved)
	})

	off := newTestEnv(t, func(c *Config) { c.PortFilterOff = true })
	off.link(t, targetConn("t1"), TargetConn, 7)
	s = off.dp.waitState(t, func(s dataplaneState) bool { return len(s.Ports) == 1 })
	require.Nil(t, s.Ports[0].Filter)
}
