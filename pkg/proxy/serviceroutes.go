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
// at its next request or refresh. It ends HoldServiceRoutes.
func (p *Proxy) SetServicePrefixes(prefixes []netip.Prefix) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.svcRoutes = serviceRoutes{prefixes: slices.Clone(prefixes)}
}

// HoldServiceRoutes is for when the service prefixes are not known (the
// services file was broken at start): each target keeps the service
// routes its request carries (written by an earlier run, the last good
// prefixes it got), via its current gateway, instead of losing them,
// until SetServicePrefixes. A target that carries none gets none.
func (p *Proxy) HoldServiceRoutes() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.svcRoutes = serviceRoutes{hold: true}
}

// serviceRoutes are the service routes handed to targets: one per prefix,
// or, held, the ones each request carries.
type serviceRoutes struct {
	prefixes []netip.Prefix
	hold     bool
}

// setServiceRoutes makes the routes of ipc that go via a gateway (inside
// gwNets, see gatewayNets) be exactly one route per service prefix via the
// current gateway of its family (the first of ipc's ExtraPrefixes, already
// written); the target's other routes stay. Held (sr.hold), the service
// prefixes are those of ipc's routes via a gateway. (These routes are
// SrcRoutes: NSM programs them on the client's side of the connection.)
func setServiceRoutes(ipc *networkservice.IPContext, sr serviceRoutes, gwNets []netip.Prefix) {
	gw := map[bool]netip.Addr{} // is4 → current gateway
	for _, s := range ipc.GetExtraPrefixes() {
		if pfx, ok := parsePrefixOrAddr(s); ok {
			if _, seen := gw[pfx.Addr().Is4()]; !seen {
				gw[pfx.Addr().Is4()] = pfx.Addr()
			}
		}
	}
	routes, ours := splitGatewayRoutes(ipc.GetSrcRoutes(), gwNets)
	prefixes := sr.prefixes
	if sr.hold {
		prefixes = ours
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

// splitGatewayRoutes returns the routes whose nexthop is not inside gwNets
// (the target's own), and the distinct prefixes of the others (ours).
func splitGatewayRoutes(rs []*networkservice.Route, gwNets []netip.Prefix) (own []*networkservice.Route, ours []netip.Prefix) {
	own = make([]*networkservice.Route, 0, len(rs))
	for _, r := range rs {
		nh, ok := parsePrefixOrAddr(r.GetNextHop())
		if !ok || !inAny(gwNets, nh.Addr()) {
			own = append(own, r)
			continue
		}
		if pfx, err := netip.ParsePrefix(r.GetPrefix()); err == nil && !slices.Contains(ours, pfx.Masked()) {
			ours = append(ours, pfx.Masked())
		}
	}
	return own, ours
}
