package proxy

import (
	"maps"
	"net/netip"
	"slices"
)

// Nexthops returns the LB nexthops of the model, both families, sorted:
// the addresses the datapath check watches (those it found down included).
func (p *Proxy) Nexthops() []netip.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.portsHops.nexthops)
}

// SetNexthopsDown replaces the set of nexthops the datapath check found
// down: the desired state leaves them out of their family's route, unless
// every nexthop of that family is down (see routedNexthops).
func (p *Proxy) SetNexthopsDown(down []netip.Addr) {
	set := make(map[netip.Addr]bool, len(down))
	for _, a := range down {
		set[a.Unmap()] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if maps.Equal(set, p.hopsDown) {
		return
	}
	p.hopsDown = set
	p.markDirty()
}

// routedNexthops is hops without those in down, except that a family whose
// every nexthop is down keeps them all: a route with nothing is worse than
// a route that may work. hops is returned itself when nothing is left out
// (the model's slices are replaced, never changed in place).
func routedNexthops(hops []netip.Addr, down map[netip.Addr]bool) []netip.Addr {
	if len(down) == 0 {
		return hops
	}
	var up4, up6, out int
	for _, a := range hops {
		switch {
		case down[a]:
			out++
		case a.Is4():
			up4++
		default:
			up6++
		}
	}
	if out == 0 {
		return hops
	}
	kept := make([]netip.Addr, 0, len(hops))
	for _, a := range hops {
		if !down[a] || (a.Is4() && up4 == 0) || (a.Is6() && up6 == 0) {
			kept = append(kept, a)
		}
	}
	return kept
}
