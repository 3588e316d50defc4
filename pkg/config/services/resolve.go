package services

import (
	"net/netip"
	"slices"

	"github.com/causeway-net/causeway/pkg/servicelb"
)

// ServiceList returns the servicelb services of a validated File.
func (f *File) ServiceList() []servicelb.Service {
	out := make([]servicelb.Service, 0, len(f.Services))
	for _, s := range f.Services {
		ip, _ := netip.ParseAddr(s.IP)
		svc := servicelb.Service{
			Ref:             servicelb.Reference{Namespace: s.Namespace, Name: s.Name, UID: s.UID},
			IP:              ip.Unmap(),
			Affinity:        servicelb.AffinityType(s.Affinity),
			AffinityTimeout: s.AffinityTimeout,
		}
		for _, p := range s.Ports {
			svc.Ports = append(svc.Ports, servicelb.ServicePort{Name: p.Name, Port: p.Port, Protocol: servicelb.Protocol(p.Protocol)})
		}
		out = append(out, svc)
	}
	return out
}

// EndpointList returns the endpoints of a validated File: each port's listed
// endpoints, then, for a port with a TargetPort, every address of targets
// of the service IP's family on that port (sorted, without duplicates).
func (f *File) EndpointList(targets []netip.Addr) []servicelb.Endpoints {
	var v4, v6 []netip.Addr
	for _, a := range targets {
		if a = a.Unmap(); a.Is4() {
			v4 = append(v4, a)
		} else if a.IsValid() {
			v6 = append(v6, a)
		}
	}
	for _, l := range []*[]netip.Addr{&v4, &v6} {
		slices.SortFunc(*l, netip.Addr.Compare)
		*l = slices.Compact(*l)
	}
	out := make([]servicelb.Endpoints, 0, len(f.Services))
	for _, s := range f.Services {
		ip, _ := netip.ParseAddr(s.IP)
		family := v6
		if ip.Unmap().Is4() {
			family = v4
		}
		e := servicelb.Endpoints{Namespace: s.Namespace, Name: s.Name}
		for _, p := range s.Ports {
			ep := servicelb.EndpointPort{Name: p.Name}
			for _, a := range p.Endpoints {
				if ap, err := netip.ParseAddrPort(a); err == nil {
					ep.Addresses = append(ep.Addresses, ap)
				}
			}
			if p.TargetPort != 0 {
				for _, a := range family {
					ep.Addresses = append(ep.Addresses, netip.AddrPortFrom(a, p.TargetPort))
				}
			}
			e.Ports = append(e.Ports, ep)
		}
		out = append(out, e)
	}
	return out
}

// UsesTargets reports whether some port takes the connected targets as
// endpoints.
func (f *File) UsesTargets() bool {
	for _, s := range f.Services {
		for _, p := range s.Ports {
			if p.TargetPort != 0 {
				return true
			}
		}
	}
	return false
}
