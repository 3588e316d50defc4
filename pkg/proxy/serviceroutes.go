package proxy

import (
	"net/netip"
	"slices"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
)

// SetServicePrefixes sets the service load balancer's prefixes: every
// target connection's IP context then carries a route to each via the
// target's gateway of its family (the bridge address), so targets reach
// the service IPs without set-up of their own. A target gets the routes
// at its next request or refresh.
func (p *Proxy) SetServicePrefixes(prefixes []netip.Prefix) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.servicePrefixes = slices.Clone(prefixes)
}

// setServiceRoutes makes the routes of ipc that go via a gateway (inside
// gwNets, see gatewayNets) be exactly one route per service prefix via the
// current gateway of its family (the first of ipc's ExtraPrefixes, already
// written); the target's other routes stay. (These routes are SrcRoutes:
// NSM programs them on the client's side of the connection.)
func setServiceRoutes(ipc *networkservice.IPContext, prefixes []netip.Prefix, gwNets []netip.Prefix) {
	gw := map[bool]netip.Addr{} // is4 → current gateway
	for _, s := range ipc.GetExtraPrefixes() {
		if pfx, ok := parsePrefixOrAddr(s); ok {
			if _, seen := gw[pfx.Addr().Is4()]; !seen {
				gw[pfx.Addr().Is4()] = pfx.Addr()
			}
		}
	}
	routes := make([]*networkservice.Route, 0, len(ipc.GetSrcRoutes())+len(prefixes))
	for _, r := range ipc.GetSrcRoutes() {
		if nh, ok := parsePrefixOrAddr(r.GetNextHop()); ok && inAny(gwNets, nh.Addr()) {
			continue // ours: rewritten below
		}
		routes = append(routes, r)
	}
	for _, pfx := range prefixes {
		if g, ok := gw[pfx.Addr().Is4()]; ok {
			routes = append(routes, &networkservice.Route{Prefix: pfx.String(), NextHop: g.String()})
		}
	}
	if len(routes) == 0 {
		routes = nil
	}
	ipc.SrcRoutes = routes
}
