package proxy

import (
	"net/netip"
	"slices"

	"github.com/causeway-net/causeway/pkg/dataplane"
)

// portsAndHops is the part of the dataplane state that the connections'
// links imply: the bridge ports, and the LB addresses (nexthops) announced
// on them. It is kept up to date by each change: a link or an address
// change costs what it changes, whatever the number of connections. Its slices are
// replaced, never changed in place, so that a State handed to the dataplane
// shares them while the model goes on changing.
type portsAndHops struct {
	ports    []int                // the links of the connections, sorted
	hairpin  bool                 // the targets' ports are in hairpin mode
	targets  []int                // with hairpin, the links of the target connections, sorted
	hops     map[netip.Addr][]int // nexthop → the LB ports it is announced on
	nexthops []netip.Addr         // the keys of hops, sorted
}

func newPortsAndHops() portsAndHops { return portsAndHops{hops: map[netip.Addr][]int{}} }

// addPort adds the link of a connection (of a target's, with target).
func (d *portsAndHops) addPort(idx int, target bool) {
	d.ports = insertSorted(d.ports, idx)
	if target && d.hairpin {
		d.targets = insertSorted(d.targets, idx)
	}
}

func (d *portsAndHops) removePort(idx int) {
	d.ports = deleteSorted(d.ports, idx)
	if d.hairpin {
		d.targets = deleteSorted(d.targets, idx)
	}
}

// setHairpin turns the targets' hairpin mode on, with the links of the
// target connections now (in any order), or off. The target list is kept
// only while it is on: without services it costs nothing per event.
func (d *portsAndHops) setHairpin(on bool, targets []int) {
	d.hairpin, d.targets = on, nil
	if on {
		d.targets = slices.Sorted(slices.Values(targets))
	}
}

// insertSorted is xs with x added, a new slice if it changed.
func insertSorted(xs []int, x int) []int {
	if i, found := slices.BinarySearch(xs, x); !found {
		return slices.Insert(slices.Clip(xs), i, x)
	}
	return xs
}

// deleteSorted is xs without x, a new slice if it changed.
func deleteSorted(xs []int, x int) []int {
	if i, found := slices.BinarySearch(xs, x); found {
		return append(slices.Clip(xs[:i]), xs[i+1:]...)
	}
	return xs
}

// addHop records that the LB behind port announces address a.
func (d *portsAndHops) addHop(a netip.Addr, port int) {
	ports, known := d.hops[a]
	if slices.Contains(ports, port) {
		return
	}
	d.hops[a] = append(ports, port)
	if !known {
		i, _ := slices.BinarySearchFunc(d.nexthops, a, netip.Addr.Compare)
		d.nexthops = slices.Insert(slices.Clip(d.nexthops), i, a)
	}
}

// removeHop withdraws address a of the LB behind port.
func (d *portsAndHops) removeHop(a netip.Addr, port int) {
	ports, known := d.hops[a]
	if !known {
		return
	}
	ports = slices.DeleteFunc(ports, func(p int) bool { return p == port })
	if len(ports) > 0 {
		d.hops[a] = ports
		return
	}
	delete(d.hops, a)
	if i, found := slices.BinarySearchFunc(d.nexthops, a, netip.Addr.Compare); found {
		d.nexthops = append(slices.Clip(d.nexthops[:i]), d.nexthops[i+1:]...)
	}
}

// state is the dataplane state with the given bridge addresses and VIPs. A
// nexthop is tied to the port it is reached through, so that the dataplane
// drops it as soon as the link goes; an address announced on two ports is
// not tied (the control plane removes it). It costs the number of
// nexthops: the ports are shared, not copied.
func (d *portsAndHops) state(bridge, vips []netip.Prefix) dataplane.State {
	s := dataplane.State{BridgeAddrs: bridge, Ports: d.ports, Nexthops: d.nexthops, VIPs: vips}
	if d.hairpin {
		s.HairpinPorts = d.targets
	}
	for a, ports := range d.hops {
		if len(ports) != 1 {
			continue
		}
		if s.NexthopPorts == nil {
			s.NexthopPorts = make(map[netip.Addr]int, len(d.hops))
		}
		s.NexthopPorts[a] = ports[0]
	}
	return s
}
