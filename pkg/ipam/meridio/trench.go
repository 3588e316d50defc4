package meridio

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/causeway-net/causeway/pkg/ipam"
)

// addTrenches takes the trench roots, with the lengths their conduit and
// node rows show.
func (r *reader) addTrenches(roots, conduits, nodes []row) {
	parentOf := map[string]string{}
	for _, c := range conduits {
		parentOf[c.id] = c.parent
	}
	condLens, nodeLens := map[string]map[int]int{}, map[string]map[int]int{}
	count := func(m map[string]map[int]int, root, cidr string) {
		if p, err := netip.ParsePrefix(cidr); err == nil {
			if m[root] == nil {
				m[root] = map[int]int{}
			}
			m[root][p.Bits()]++
		}
	}
	for _, c := range conduits {
		count(condLens, c.parent, c.cidr)
	}
	for _, n := range nodes {
		count(nodeLens, parentOf[n.parent], n.cidr)
	}
	for _, root := range roots {
		t, reason := r.trench(root, condLens[root.id], nodeLens[root.id])
		if t == nil {
			r.sum.skip(root, reason)
			r.skipped[root.id] = true
			continue
		}
		r.trenches[root.id] = t
	}
}

func (r *reader) trench(root row, condLens, nodeLens map[int]int) (*trenchState, string) {
	name, family, ok := splitRootName(root.name)
	if !ok {
		return nil, "a trench root is named <trench>-0 (IPv4) or <trench>-1 (IPv6)"
	}
	if err := ipam.ValidateName("trench", name, false); err != nil {
		return nil, err.Error()
	}
	pool, err := netip.ParsePrefix(root.cidr)
	if err != nil || pool.Addr().Is4() != (family == ipam.IPv4) || pool.Addr().Is4In6() {
		return nil, fmt.Sprintf("the pool is not an %s CIDR", family)
	}
	g := r.opts.geometry(family)
	g.Pool = pool.Masked()
	t := &trenchState{Trench: &Trench{Name: name, Family: family}, names: map[string]bool{}, cidrs: map[netip.Prefix]bool{}}
	if l, ok := mostCommon(condLens); ok {
		g.ConduitLength, t.StoredConduitLength = l, true
	}
	if l, ok := mostCommon(nodeLens); ok {
		g.NodeLength, t.StoredNodeLength = l, true
	}
	if err := g.Validate(); err != nil {
		return nil, fmt.Sprintf("geometry %s conduit /%d node /%d: %v", g.Pool, g.ConduitLength, g.NodeLength, err)
	}
	for _, other := range r.trenches {
		if other.Name == name && other.Family == family {
			return nil, "a second root of the same trench and family"
		}
	}
	t.Geometry = g
	return t, ""
}

// splitRootName splits "<trench>-<0|1>".
func splitRootName(s string) (string, ipam.Family, bool) {
	i := strings.LastIndexByte(s, '-')
	if i <= 0 {
		return "", 0, false
	}
	switch s[i+1:] {
	case "0":
		return s[:i], ipam.IPv4, true
	case "1":
		return s[:i], ipam.IPv6, true
	}
	return "", 0, false
}

// mostCommon returns the length most rows have (the shortest of a tie).
func mostCommon(lens map[int]int) (int, bool) {
	best, n := 0, 0
	for l, c := range lens {
		if c > n || (c == n && l < best) {
			best, n = l, c
		}
	}
	return best, n > 0
}
