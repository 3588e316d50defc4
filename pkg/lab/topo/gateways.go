package topo

import (
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
)

// Gateways are the gateways of routes, a single route's and each of a
// multipath route's nexthops, sorted.
func Gateways(routes []netlink.Route) []netip.Addr {
	var out []netip.Addr
	for _, r := range routes {
		if r.Gw != nil {
			a, _ := netip.AddrFromSlice(r.Gw)
			out = append(out, a.Unmap())
		}
		for _, nh := range r.MultiPath {
			a, _ := netip.AddrFromSlice(nh.Gw)
			out = append(out, a.Unmap())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}
