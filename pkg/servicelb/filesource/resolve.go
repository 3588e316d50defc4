package filesource

import (
	"net/netip"
	"slices"

	"github.com/causeway-net/causeway/internal/yamlfile"
	"github.com/causeway-net/causeway/pkg/servicelb"
)

// Facts are what the proxy knows at run time that a services file must
// not collide with. A service IP may not lie in a VIP (the service would
// take over the VIP's traffic: its ingress from the load balancers and
// the external clients' flows), nor be the bridge address (the proxy's
// own, the targets' gateway), nor lie in the node subnet the targets'
// addresses come from (the IPAM hands them out); no prefix may overlap
// that subnet (the targets would reach their neighbours via the gateway).
type Facts struct {
	// VIPs are the VIPs the proxy serves.
	VIPs []netip.Prefix
	// Bridge are the proxy's bridge addresses with the node prefix
	// length, one per family (e.g. 172.16.0.1/24).
	Bridge []netip.Prefix
}

// Resolve returns f without the services and prefixes that collide with
// facts (f itself is not changed), and one error per entry left out,
// named as Parse names it (without the line). It is meant for the file in
// force when the facts change (a new VIP, a new bridge address). A
// resolved file whose prefixes all collide routes the host prefixes of
// its services, as a file without prefixes does.
func (f *File) Resolve(facts Facts) (*File, []error) {
	badSvcs, badPfxs, errs := collisions(f, nil, facts)
	if len(errs) == 0 {
		return f, nil
	}
	out := &File{}
	for i, p := range f.Prefixes {
		if !badPfxs[i] {
			out.Prefixes = append(out.Prefixes, p)
		}
	}
	for i, s := range f.Services {
		if !badSvcs[i] {
			out.Services = append(out.Services, s)
		}
	}
	return out, errs
}

// collisions checks the prefixes and service IPs of a validated File
// against facts; it returns the indexes of the colliding services and
// prefixes, and one error for each.
func collisions(f *File, l yamlfile.Lines, facts Facts) (svcs, pfxs map[int]bool, errs []error) {
	var c checker
	svcs, pfxs = map[int]bool{}, map[int]bool{}
	for i, s := range f.Prefixes {
		if p, err := netip.ParsePrefix(s); err == nil && c.prefixCollides(l.Where("prefixes", i, ""), p, facts) {
			pfxs[i] = true
		}
	}
	for i, s := range f.Services {
		w := l.Where("services", i, s.Namespace+"/"+s.Name)
		if ip, err := netip.ParseAddr(s.IP); err == nil && c.serviceIPCollides(w, ip.Unmap(), facts) {
			svcs[i] = true
		}
	}
	return svcs, pfxs, c.errs
}

func (c *checker) serviceIPCollides(w string, ip netip.Addr, facts Facts) bool {
	for _, v := range facts.VIPs {
		if v.Contains(ip) {
			c.bad(w, "ip %s is in the VIP %s: the service would take over the VIP's traffic", ip, v)
			return true
		}
	}
	for _, b := range facts.Bridge {
		switch {
		case b.Addr() == ip:
			c.bad(w, "ip %s is the proxy's own address on the bridge (the targets' gateway)", ip)
			return true
		case b.Masked().Contains(ip):
			c.bad(w, "ip %s is in %s, the conduit's node subnet, where the targets' addresses come from", ip, b.Masked())
			return true
		}
	}
	return false
}

func (c *checker) prefixCollides(w string, p netip.Prefix, facts Facts) bool {
	for _, b := range facts.Bridge {
		if p.Overlaps(b.Masked()) {
			c.bad(w, "%s overlaps %s, the conduit's node subnet, where the targets' addresses come from: the targets would reach their neighbours via the gateway", p, b.Masked())
			return true
		}
	}
	return false
}

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
