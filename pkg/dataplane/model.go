package dataplane

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
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

// spec is a validated, normalised State: the one input of convergeLocked
// (the goal it makes the kernel equal to). Its sets are sorted slices, so
// that an Apply reads each list once and the diff against the model costs one lookup per element.
type spec struct {
	// noBridge: the bridge goes, and everything on it (the Teardown
	// state, which is otherwise empty).
	noBridge     bool
	addrs        map[netip.Prefix]struct{} // at most one per family
	ports        []int                     // sorted, unique
	nexthops     [2][]netip.Addr           // sorted, unique, per family
	vips         []netip.Prefix            // masked, sorted, unique
	nexthopPorts map[netip.Addr]int        // a nexthop → the port it is tied to (Port.Nexthops)
	tiedPorts    map[int]struct{}          // the ports of nexthopPorts
	hairpin      []int                     // sorted, unique: the ports in hairpin mode
	filters      map[int]portFilter
	// keepFilters: leave the port filter table as it is (the adopted
	// state, before the first Apply).
	keepFilters bool
}

// hasPrefix reports whether d has p as a VIP or, for a host prefix, as a
// nexthop.
func (d *spec) hasPrefix(p netip.Prefix) bool {
	if _, ok := slices.BinarySearchFunc(d.vips, p, netip.Prefix.Compare); ok {
		return true
	}
	return p.IsSingleIP() && slices.Contains(d.nexthops[familyOf(p.Addr())], p.Addr())
}

// emptyState is the Teardown state: nothing, not even the bridge.
func emptyState() *spec { return &spec{noBridge: true} }

// normalize validates s and returns its canonical form: addresses unmapped,
// VIPs masked, duplicates removed, sets sorted. A list that is already in
// order (as the proxy sends it) is copied, not sorted.
func normalize(s State) (*spec, error) {
	d := &spec{
		addrs:        make(map[netip.Prefix]struct{}, len(s.BridgeAddrs)),
		ports:        make([]int, 0, len(s.Ports)),
		vips:         make([]netip.Prefix, 0, len(s.VIPs)),
		nexthopPorts: map[netip.Addr]int{},
		tiedPorts:    map[int]struct{}{},
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
	for _, p := range s.Ports {
		if p.Index <= 0 {
			errs = append(errs, fmt.Errorf("port %d: invalid interface index", p.Index))
			continue
		}
		d.ports = append(d.ports, p.Index)
		if p.Hairpin {
			d.hairpin = append(d.hairpin, p.Index)
		}
		for _, a := range p.Nexthops {
			a = a.Unmap().WithZone("")
			if _, tied := d.nexthopPorts[a]; !tied {
				d.nexthopPorts[a] = p.Index
				d.tiedPorts[p.Index] = struct{}{}
			}
		}
	}
	d.ports = sortSet(d.ports, cmp.Compare[int])
	d.hairpin = sortSet(d.hairpin, cmp.Compare[int])
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
		d.nexthops[f] = sortSet(d.nexthops[f], netip.Addr.Compare)
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
		d.vips = append(d.vips, p.Masked())
	}
	d.vips = sortSet(d.vips, netip.Prefix.Compare)
	filters, err := normalizeFilters(s.Ports, d.vips)
	if err != nil {
		errs = append(errs, err)
	}
	d.filters = filters
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid state: %w", errors.Join(errs...))
	}
	return d, nil
}

// sortSet sorts xs (unless it already is) and removes duplicates, in place.
func sortSet[T any](xs []T, cmp func(a, b T) int) []T {
	if !slices.IsSortedFunc(xs, cmp) {
		slices.SortFunc(xs, cmp)
	}
	return slices.CompactFunc(xs, func(a, b T) bool { return cmp(a, b) == 0 })
}

// withLeftovers is d with what h holds added: h's ports, nexthops and VIPs
// (untied to ports; d's bridge addresses and ties stay). d is not changed.
func (d *spec) withLeftovers(h *spec) *spec {
	if h == nil {
		return d
	}
	u := *d
	u.ports = sortSet(append(slices.Clone(d.ports), h.ports...), cmp.Compare[int])
	for _, f := range families {
		u.nexthops[f] = sortSet(append(slices.Clone(d.nexthops[f]), h.nexthops[f]...), netip.Addr.Compare)
	}
	u.vips = sortSet(append(slices.Clone(d.vips), h.vips...), netip.Prefix.Compare)
	return &u
}

// holdsNothing tells whether d has no port, nexthop or VIP (what a held
// state keeps).
func (d *spec) holdsNothing() bool {
	for _, f := range families {
		if len(d.nexthops[f]) > 0 {
			return false
		}
	}
	return len(d.ports) == 0 && len(d.vips) == 0
}

// hasPort tells whether port idx is in d's ports or tied to a nexthop.
func (d *spec) hasPort(idx int) bool {
	if _, ok := d.tiedPorts[idx]; ok {
		return true
	}
	_, ok := slices.BinarySearch(d.ports, idx)
	return ok
}

// state converts d back into a State (sorted), for Snapshot.
func (d *spec) state() State {
	var s State
	for p := range d.addrs {
		s.BridgeAddrs = append(s.BridgeAddrs, p)
	}
	slices.SortFunc(s.BridgeAddrs, netip.Prefix.Compare)
	s.Ports = make([]Port, len(d.ports))
	for i, idx := range d.ports {
		_, hairpin := slices.BinarySearch(d.hairpin, idx)
		s.Ports[i] = Port{Index: idx, Hairpin: hairpin}
	}
	for _, f := range families {
		for _, a := range d.nexthops[f] {
			if idx, tied := d.nexthopPorts[a]; tied {
				if i, ok := slices.BinarySearch(d.ports, idx); ok {
					s.Ports[i].Nexthops = append(s.Ports[i].Nexthops, a)
				}
			}
		}
	}
	s.Nexthops = append(append(s.Nexthops, d.nexthops[v4]...), d.nexthops[v6]...)
	s.VIPs = slices.Clone(d.vips)
	return s
}

// portState is what the Dataplane knows of one port it owns. The model
// holds only settled ports: enslaved to the bridge, or known not to exist;
// a wanted port missing from the model is one to enslave.
type portState struct {
	// enslaved: the port was enslaved to the bridge (by us, or found so on
	// an adopted bridge).
	enslaved bool
	// absent: the link does not exist in the kernel (enslaving it failed
	// with ENODEV, or the link table saw it deleted).
	absent bool
	// mtu is the port's MTU when last seen (0: unknown).
	mtu int
	// hairpin: the Dataplane turned the port's hairpin mode on (a port
	// found on an adopted bridge counts as off until goal says).
	hairpin bool
}

// markAbsent records that the port's link does not exist: whatever was
// set on it went with it.
func (ps *portState) markAbsent() {
	ps.absent, ps.enslaved, ps.hairpin = true, false, false
}

// routeState is the default route of one family in the table, as applied.
type routeState struct {
	present  bool
	nexthops []netip.Addr // sorted
}

// model is what the Dataplane believes the kernel holds of its own objects.
type model struct {
	bridgeIndex int
	bridgeMTU   int                       // as last read or set by syncMTULocked (0: unknown)
	addrs       map[netip.Prefix]struct{} // bridge addresses, link-local excluded
	ports       *sortedMap[int, *portState]
	routes      [2]routeState
	rules       *sortedMap[netip.Prefix, struct{}]
	filters     filterState
	guard       bool // the guard table is there (guard.go)
}

func newModel() *model {
	return &model{
		addrs: map[netip.Prefix]struct{}{},
		ports: newPorts(),
		rules: newRules(),
	}
}

func newPorts() *sortedMap[int, *portState] { return newSortedMap[int, *portState](cmp.Compare[int]) }

func newRules() *sortedMap[netip.Prefix, struct{}] {
	return newSortedMap[netip.Prefix, struct{}](netip.Prefix.Compare)
}

// adopted is the desired state that keeps what the model holds: the
// Dataplane's state from New until the first Apply, so that the reconciler
// restores rather than changes. Routes and rules are kept only with
// Options.AdoptLeftovers.
func (m *model) adopted(routesAndRules bool) *spec {
	d := &spec{addrs: maps.Clone(m.addrs), ports: slices.Clone(m.ports.keys), keepFilters: true}
	if routesAndRules {
		for _, f := range families {
			d.nexthops[f] = slices.Clone(m.routes[f].nexthops)
		}
		d.vips = slices.Clone(m.rules.keys)
	}
	return d
}

// effectiveNexthopsLocked is the nexthop list of family f that belongs in
// the route: the desired nexthops minus those tied to a port that is
// absent.
func (dp *Dataplane) effectiveNexthopsLocked(goal *spec, f family) []netip.Addr {
	nhs := goal.nexthops[f]
	if len(goal.nexthopPorts) == 0 {
		return nhs
	}
	out := make([]netip.Addr, 0, len(nhs))
	for _, a := range nhs {
		if idx, ok := goal.nexthopPorts[a]; ok && dp.portAbsentLocked(idx) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// portAbsentLocked tells whether link idx is known not to exist.
func (dp *Dataplane) portAbsentLocked(idx int) bool {
	if ps, ok := dp.m.ports.get(idx); ok {
		return ps.absent
	}
	known, exists := dp.linkTable.linkExists(idx)
	return known && !exists
}
