package proxy

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/causeway-net/causeway/pkg/dataplane"
)

// portsAndHops is the part of the dataplane state that the connections'
// links imply: the bridge ports, each with its attributes (hairpin mode,
// the nexthops tied to it, the addresses its connection claims, its
// filter), decided here once, and the LB addresses (nexthops) announced on them. It is kept
// up to date by each change: a link or an address change costs what it
// changes, whatever the number of connections. Its slices are replaced,
// never changed in place, so that a State handed to the dataplane shares
// them while the model goes on changing.
type portsAndHops struct {
	ports    []dataplane.Port     // the links of the connections, sorted by index
	hairpin  bool                 // the targets' ports are in hairpin mode
	hops     map[netip.Addr][]int // nexthop → the LB ports it is announced on
	nexthops []netip.Addr         // the keys of hops, sorted
}

func newPortsAndHops() portsAndHops { return portsAndHops{hops: map[netip.Addr][]int{}} }

// find is the position of port idx in d.ports, and whether it is there.
func (d *portsAndHops) find(idx int) (int, bool) {
	return slices.BinarySearchFunc(d.ports, idx, func(p dataplane.Port, idx int) int { return cmp.Compare(p.Index, idx) })
}

// addPort adds the link of a connection (of a target's, with target) whose
// addresses are claims, held to filter (nil: not filtered).
func (d *portsAndHops) addPort(idx int, target bool, claims []netip.Addr, filter *dataplane.PortFilter) {
	port := dataplane.Port{Index: idx, Hairpin: target && d.hairpin, Claims: claims, Filter: filter}
	i, found := d.find(idx)
	if found {
		d.ports = slices.Clone(d.ports)
		d.ports[i] = port
		return
	}
	d.ports = slices.Insert(slices.Clip(d.ports), i, port)
}

// removePort removes the link idx (its nexthops are removed first).
func (d *portsAndHops) removePort(idx int) {
	if i, found := d.find(idx); found {
		d.ports = append(slices.Clip(d.ports[:i]), d.ports[i+1:]...)
	}
}

// setFilter holds port idx to filter (nil: not filtered), and reports
// whether that changed it.
func (d *portsAndHops) setFilter(idx int, filter *dataplane.PortFilter) bool {
	i, found := d.find(idx)
	if !found || sameFilter(d.ports[i].Filter, filter) {
		return false
	}
	d.ports = slices.Clone(d.ports)
	d.ports[i].Filter = filter
	return true
}

func sameFilter(a, b *dataplane.PortFilter) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Addrs, b.Addrs)
}

// setHairpin turns the hairpin mode of the targets' ports (the links of
// the target connections now, in any order) on or off, and the mode of the
// target ports added from now on.
func (d *portsAndHops) setHairpin(on bool, targets []int) {
	d.hairpin = on
	ports := slices.Clone(d.ports)
	for _, idx := range targets {
		if i, found := d.find(idx); found {
			ports[i].Hairpin = on
		}
	}
	d.ports = ports
}

// addHop records that the LB behind port announces address a.
func (d *portsAndHops) addHop(a netip.Addr, port int) {
	ports, known := d.hops[a]
	if slices.Contains(ports, port) {
		return
	}
	was := d.tie(a)
	d.hops[a] = append(ports, port)
	if !known {
		i, _ := slices.BinarySearchFunc(d.nexthops, a, netip.Addr.Compare)
		d.nexthops = slices.Insert(slices.Clip(d.nexthops), i, a)
	}
	d.retie(a, was)
}

// removeHop withdraws address a of the LB behind port.
func (d *portsAndHops) removeHop(a netip.Addr, port int) {
	ports, known := d.hops[a]
	if !known {
		return
	}
	was := d.tie(a)
	ports = slices.DeleteFunc(ports, func(p int) bool { return p == port })
	if len(ports) > 0 {
		d.hops[a] = ports
	} else {
		delete(d.hops, a)
		if i, found := slices.BinarySearchFunc(d.nexthops, a, netip.Addr.Compare); found {
			d.nexthops = append(slices.Clip(d.nexthops[:i]), d.nexthops[i+1:]...)
		}
	}
	d.retie(a, was)
}

// tie is the port nexthop a is tied to: the one port it is announced on;
// an address announced on two ports is tied to neither (the control plane
// removes it), and 0 says so.
func (d *portsAndHops) tie(a netip.Addr) int {
	if ports := d.hops[a]; len(ports) == 1 {
		return ports[0]
	}
	return 0
}

// retie moves nexthop a from the port it was tied to (was, 0: none) to the
// port it is tied to now, in the ports' attributes.
func (d *portsAndHops) retie(a netip.Addr, was int) {
	now := d.tie(a)
	if now == was {
		return
	}
	ports := slices.Clone(d.ports)
	if i, found := d.find(was); was != 0 && found {
		ports[i].Nexthops = slices.DeleteFunc(slices.Clone(ports[i].Nexthops), func(h netip.Addr) bool { return h == a })
		if len(ports[i].Nexthops) == 0 {
			ports[i].Nexthops = nil
		}
	}
	if i, found := d.find(now); now != 0 && found {
		hops := slices.Clone(ports[i].Nexthops)
		j, _ := slices.BinarySearchFunc(hops, a, netip.Addr.Compare)
		ports[i].Nexthops = slices.Insert(hops, j, a)
	}
	d.ports = ports
}

// state is the dataplane state with the given bridge addresses and VIPs.
// It costs nothing per port: the ports are shared, not copied.
func (d *portsAndHops) state(bridge, vips []netip.Prefix) dataplane.State {
	return dataplane.State{BridgeAddrs: bridge, Ports: d.ports, Nexthops: d.nexthops, VIPs: vips}
}
