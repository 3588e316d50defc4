package conntrackflush

import "net/netip"

// prefixMatcher tells whether an address is inside one of a set of
// prefixes: host prefixes (the usual VIP, every nexthop) by one lookup,
// the others one by one.
type prefixMatcher struct {
	hosts map[netip.Addr]struct{}
	nets  []netip.Prefix
}

func newPrefixMatcher(ps []netip.Prefix) prefixMatcher {
	m := prefixMatcher{hosts: make(map[netip.Addr]struct{}, len(ps))}
	for _, p := range ps {
		if p.IsSingleIP() {
			m.hosts[p.Addr()] = struct{}{}
		} else {
			m.nets = append(m.nets, p)
		}
	}
	return m
}

func (m *prefixMatcher) match(a netip.Addr) bool {
	a = a.Unmap()
	if _, ok := m.hosts[a]; ok {
		return true
	}
	for _, p := range m.nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
