package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// family indexes per-family arrays: 0 is IPv4, 1 is IPv6.
type family int

const (
	v4 family = iota
	v6
)

var families = [...]family{v4, v6}

func (f family) String() string {
	if f == v6 {
		return "ipv6"
	}
	return "ipv4"
}

func familyOf(a netip.Addr) family {
	if a.Is4() {
		return v4
	}
	return v6
}

// defaultDst is the destination of the default route of a family.
func (f family) defaultDst() netip.Prefix {
	if f == v6 {
		return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
}

// desired is a validated, normalised State.
type desired struct {
	addrs        map[netip.Prefix]struct{} // at most one per family
	ports        map[int]struct{}
	nexthops     [2][]netip.Addr // sorted, unique, per family
	vips         map[netip.Prefix]struct{}
	nexthopPorts map[netip.Addr]int
}

// normalize validates s and returns its canonical form: addresses unmapped,
// VIPs masked, duplicates removed, nexthops sorted per family.
func normalize(s State) (*desired, error) {
	d := &desired{
		addrs:        make(map[netip.Prefix]struct{}, len(s.BridgeAddrs)),
		ports:        make(map[int]struct{}, len(s.Ports)),
		vips:         make(map[netip.Prefix]struct{}, len(s.VIPs)),
		nexthopPorts: make(map[netip.Addr]int, len(s.NexthopPorts)),
	}
	var errs []error
	var seen [2]netip.Prefix
	for _, p := range s.BridgeAddrs {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("bridge address %v: invalid prefix", p))
			continue
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits())
		if !p.IsValid() || p.Addr().IsUnspecified() || p.Addr().IsMulticast() || p.Addr().Zone() != "" {
			errs = append(errs, fmt.Errorf("bridge address %v: not a unicast interface address", p))
			continue
		}
		f := familyOf(p.Addr())
		if seen[f].IsValid() && seen[f] != p {
			errs = append(errs, fmt.Errorf("bridge address %v: the bridge already gets %v (one address per family)", p, seen[f]))
			continue
		}
		seen[f] = p
		d.addrs[p] = struct{}{}
	}
	for _, idx := range s.Ports {
		if idx <= 0 {
			errs = append(errs, fmt.Errorf("port %d: invalid interface index", idx))
			continue
		}
		d.ports[idx] = struct{}{}
	}
	for _, a := range s.Nexthops {
		if !a.IsValid() || a.Unmap().IsUnspecified() || a.IsMulticast() {
			errs = append(errs, fmt.Errorf("nexthop %v: not a unicast address", a))
			continue
		}
		a = a.Unmap().WithZone("")
		f := familyOf(a)
		d.nexthops[f] = append(d.nexthops[f], a)
	}
	for _, f := range families {
		slices.SortFunc(d.nexthops[f], func(a, b netip.Addr) int { return a.Compare(b) })
		d.nexthops[f] = slices.Compact(d.nexthops[f])
	}
	for _, p := range s.VIPs {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("vip %v: invalid prefix", p))
			continue
		}
		p = netip.PrefixFrom(p.Addr().Unmap().WithZone(""), p.Bits())
		if !p.IsValid() || p.Bits() == 0 {
			errs = append(errs, fmt.Errorf("vip %v: a VIP must not be a default prefix", p))
			continue
		}
		d.vips[p.Masked()] = struct{}{}
	}
	for a, idx := range s.NexthopPorts {
		d.nexthopPorts[a.Unmap().WithZone("")] = idx
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid state: %w", errors.Join(errs...))
	}
	return d, nil
}

// state converts d back into a State (sorted), for Snapshot.
func (d *desired) state() State {
	var s State
	for p := range d.addrs {
		s.BridgeAddrs = append(s.BridgeAddrs, p)
	}
	slices.SortFunc(s.BridgeAddrs, comparePrefix)
	for idx := range d.ports {
		s.Ports = append(s.Ports, idx)
	}
	slices.Sort(s.Ports)
	s.Nexthops = append(append(s.Nexthops, d.nexthops[v4]...), d.nexthops[v6]...)
	for p := range d.vips {
		s.VIPs = append(s.VIPs, p)
	}
	slices.SortFunc(s.VIPs, comparePrefix)
	if len(d.nexthopPorts) > 0 {
		s.NexthopPorts = make(map[netip.Addr]int, len(d.nexthopPorts))
		for a, i := range d.nexthopPorts {
			s.NexthopPorts[a] = i
		}
	}
	return s
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// portState is what the Dataplane knows of one port it owns.
type portState struct {
	// enslaved: the port was enslaved to the bridge (by us, or found so on
	// an adopted bridge).
	enslaved bool
	// absent: the link does not exist in the kernel (enslaving it failed
	// with ENODEV, or the link monitor saw it deleted).
	absent bool
}

// routeState is the default route of one family in the table, as applied.
type routeState struct {
	present  bool
	nexthops []netip.Addr // sorted
}

// model is what the Dataplane believes the kernel holds of its own objects.
type model struct {
	bridgeIndex int
	addrs       map[netip.Prefix]struct{} // bridge addresses, link-local excluded
	ports       map[int]*portState
	routes      [2]routeState
	rules       map[netip.Prefix]struct{}
}

func newModel() *model {
	return &model{
		addrs: map[netip.Prefix]struct{}{},
		ports: map[int]*portState{},
		rules: map[netip.Prefix]struct{}{},
	}
}

// effectiveNexthops is the nexthop list of family f that belongs in the
// route: the desired nexthops minus those tied to a port that is absent.
func (dp *Dataplane) effectiveNexthopsLocked(f family) []netip.Addr {
	want := dp.want.nexthops[f]
	if len(dp.want.nexthopPorts) == 0 {
		return want
	}
	out := make([]netip.Addr, 0, len(want))
	for _, a := range want {
		if idx, ok := dp.want.nexthopPorts[a]; ok && dp.portAbsentLocked(idx) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// portAbsentLocked tells whether link idx is known not to exist.
func (dp *Dataplane) portAbsentLocked(idx int) bool {
	if ps, ok := dp.m.ports[idx]; ok {
		return ps.absent
	}
	known, exists := dp.mon.linkExists(idx)
	return known && !exists
}
