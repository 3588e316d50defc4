package kubesource

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/causeway-net/causeway/pkg/servicelb"
)

// endpointsOf returns the endpoints of each part of a Service from its
// slices: per service port, the first address of every endpoint of the
// part's family whose slice has a port of the same name and protocol.
// Ready endpoints serve; when a port has none, the serving ones that
// terminate do (kube-proxy's fallback); publishNotReady takes them all.
// Addresses that allow refuses are left out.
func endpointsOf(parts []familyPart, bySlice map[string]*discoveryv1.EndpointSlice, publishNotReady bool, allow func(slice string, a netip.Addr) bool) []servicelb.Endpoints {
	out := make([]servicelb.Endpoints, 0, len(parts))
	for _, part := range parts {
		e := servicelb.Endpoints{Namespace: part.service.Ref.Namespace, Name: part.service.Ref.Name}
		for _, p := range part.service.Ports {
			addrs := portAddrs(part.family, p, bySlice, publishNotReady, allow)
			if len(addrs) > 0 {
				e.Ports = append(e.Ports, servicelb.EndpointPort{Name: p.Name, Addresses: addrs})
			}
		}
		out = append(out, e)
	}
	return out
}

// portAddrs is the sorted, distinct endpoints of one service port.
func portAddrs(fam corev1.IPFamily, p servicelb.ServicePort, bySlice map[string]*discoveryv1.EndpointSlice, all bool,
	allow func(slice string, a netip.Addr) bool) []netip.AddrPort {
	var ready, serving []netip.AddrPort
	for name, s := range bySlice {
		if string(s.AddressType) != string(fam) {
			continue
		}
		port, ok := slicePort(s, p)
		if !ok {
			continue
		}
		for _, ep := range s.Endpoints {
			a, ok := endpointAddr(ep, port)
			if !ok || !allow(name, a.Addr()) {
				continue
			}
			switch c := ep.Conditions; {
			case all || isTrue(c.Ready, true):
				ready = append(ready, a)
			case isTrue(c.Serving, false) && isTrue(c.Terminating, false):
				serving = append(serving, a)
			}
		}
	}
	if len(ready) == 0 {
		ready = serving
	}
	slices.SortFunc(ready, netip.AddrPort.Compare)
	return slices.Compact(ready)
}

// slicePort finds the port of s that serves p: same name and protocol.
func slicePort(s *discoveryv1.EndpointSlice, p servicelb.ServicePort) (uint16, bool) {
	for _, sp := range s.Ports {
		proto := corev1.ProtocolTCP
		if sp.Protocol != nil {
			proto = *sp.Protocol
		}
		name := ""
		if sp.Name != nil {
			name = *sp.Name
		}
		if name == p.Name && string(proto) == string(p.Protocol) && sp.Port != nil && *sp.Port > 0 && *sp.Port <= 65535 {
			return uint16(*sp.Port), true
		}
	}
	return 0, false
}

// endpointAddr is ep's first address (the one consumers use) on port.
func endpointAddr(ep discoveryv1.Endpoint, port uint16) (netip.AddrPort, bool) {
	if len(ep.Addresses) == 0 {
		return netip.AddrPort{}, false
	}
	ip, err := netip.ParseAddr(ep.Addresses[0])
	if err != nil {
		return netip.AddrPort{}, false
	}
	a := netip.AddrPortFrom(ip.Unmap(), port)
	return a, servicelb.ValidEndpoint(a)
}

// isTrue reads an optional condition; unset is def (the API says an unset
// ready means ready).
func isTrue(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}
