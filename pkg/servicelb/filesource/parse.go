package filesource

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/causeway-net/causeway/internal/yamlfile"
	"github.com/causeway-net/causeway/pkg/servicelb"
)

// Load reads and parses the services file at path.
func Load(path string) (*File, error) { return LoadFor(path, Facts{}) }

// LoadFor reads the services file at path and parses it with ParseFor.
func LoadFor(path string, facts Facts) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read services file: %w", err)
	}
	f, err := ParseFor(data, facts)
	if err != nil {
		return nil, fmt.Errorf("services file %s: %w", path, err)
	}
	return f, nil
}

// Parse decodes and validates one YAML document: unknown fields, an empty
// document and every semantic problem are rejected, each problem naming
// its entry (services[i] "namespace/name" (line n) ports[j]) and the
// reason. Protocols and affinities come back in their canonical spelling,
// an empty namespace as DefaultNamespace.
func Parse(data []byte) (*File, error) { return ParseFor(data, Facts{}) }

// ParseFor is Parse, and also refuses a file that collides with the
// proxy's state (see Facts), each collision named like the other
// problems.
func ParseFor(data []byte, facts Facts) (*File, error) {
	var f File
	l, err := yamlfile.DecodeStrict(data, &f, "write `services: []` for no services")
	if err != nil {
		return nil, err
	}
	if err := validate(&f, l); err != nil {
		return nil, err
	}
	if _, _, errs := collisions(&f, l, facts); len(errs) > 0 {
		return nil, &yamlfile.InvalidError{Problems: errs}
	}
	return &f, nil
}

type checker struct {
	errs []error
}

func (c *checker) bad(where, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...)))
}

// listener is what two service ports may not share.
type listener struct {
	ip    netip.Addr
	proto servicelb.Protocol
	port  uint16
}

func validate(f *File, l yamlfile.Lines) error {
	var c checker
	var prefixes []netip.Prefix
	for i, s := range f.Prefixes {
		w := l.Where("prefixes", i, "")
		p, err := netip.ParsePrefix(s)
		switch {
		case err != nil:
			c.bad(w, "%q is not a prefix in CIDR notation", s)
		case servicelb.CheckServicePrefix(p) != nil:
			c.bad(w, "%v", servicelb.CheckServicePrefix(p))
		default:
			prefixes = append(prefixes, p)
		}
	}
	names := map[string]int{}
	listeners := map[listener]string{}
	for i := range f.Services {
		s := &f.Services[i]
		if s.Namespace == "" {
			s.Namespace = DefaultNamespace
		}
		id := s.Namespace + "/" + s.Name
		w := l.Where("services", i, id)
		if s.Name == "" {
			c.bad(w, "name is empty")
		} else if first, dup := names[id]; dup {
			c.bad(w, "%s is already defined by services[%d]", id, first)
		} else {
			names[id] = i
		}
		ip, ok := c.serviceIP(w, s.IP, prefixes)
		c.affinity(w, s)
		if len(s.Ports) == 0 {
			c.bad(w, "ports is empty")
		}
		portNames := map[string]int{}
		for j := range s.Ports {
			p := &s.Ports[j]
			pw := fmt.Sprintf("%s ports[%d]", w, j)
			if p.Name == "" && len(s.Ports) > 1 {
				c.bad(pw, "name is empty; a service with several ports names each")
			} else if first, dup := portNames[p.Name]; dup {
				c.bad(pw, "name %q is already used by ports[%d]", p.Name, first)
			} else {
				portNames[p.Name] = j
			}
			proto, ok2 := c.port(pw, p, ip, ok)
			if !ok || !ok2 || p.Port == 0 {
				continue
			}
			k := listener{ip, proto, p.Port}
			if other, dup := listeners[k]; dup {
				c.bad(pw, "%s %s is already served by %s", proto, netip.AddrPortFrom(ip, p.Port), other)
			} else {
				listeners[k] = pw
			}
		}
	}
	if len(c.errs) == 0 {
		return nil
	}
	return &yamlfile.InvalidError{Problems: c.errs}
}

func (c *checker) serviceIP(w, s string, prefixes []netip.Prefix) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(s)
	switch {
	case s == "":
		c.bad(w, "ip is empty")
		return ip, false
	case err != nil:
		c.bad(w, "ip %q is not an IP address", s)
		return ip, false
	}
	ip = ip.Unmap()
	switch {
	case ip.IsUnspecified() || ip.IsLoopback() || ip.IsMulticast() || ip.IsLinkLocalUnicast():
		c.bad(w, "ip %s cannot be a service IP (unspecified, loopback, multicast or link-local)", ip)
		return ip, false
	case len(prefixes) > 0 && !containedIn(prefixes, ip):
		c.bad(w, "ip %s is in none of the prefixes %v", ip, prefixes)
	}
	return ip, true
}

func containedIn(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (c *checker) affinity(w string, s *Service) {
	switch strings.ToLower(s.Affinity) {
	case "", "none":
		s.Affinity = string(servicelb.AffinityNone)
		if s.AffinityTimeout != 0 {
			c.bad(w, "affinityTimeout is set without affinity ClientIP")
		}
	case "clientip":
		s.Affinity = string(servicelb.AffinityClientIP)
		if s.AffinityTimeout < 0 {
			c.bad(w, "affinityTimeout %s is negative", s.AffinityTimeout)
		}
	default:
		c.bad(w, "affinity %q is not None or ClientIP", s.Affinity)
	}
}

// port checks one port; okIP says whether the service IP is known (for the
// endpoints' family).
func (c *checker) port(w string, p *Port, ip netip.Addr, okIP bool) (servicelb.Protocol, bool) {
	if p.Port == 0 {
		c.bad(w, "port is missing or 0")
	}
	proto, err := servicelb.ParseProtocol(p.Protocol)
	if err != nil {
		c.bad(w, "%v", err)
	} else {
		p.Protocol = string(proto)
	}
	if len(p.Endpoints) == 0 && p.TargetPort == 0 {
		c.bad(w, "neither endpoints nor targetPort: the port would have no endpoint")
	}
	for k, e := range p.Endpoints {
		ew := fmt.Sprintf("%s endpoints[%d]", w, k)
		a, err := netip.ParseAddrPort(e)
		switch {
		case err != nil:
			c.bad(ew, "%q is not address:port (IPv6 as [addr]:port)", e)
		case !servicelb.ValidEndpoint(a):
			c.bad(ew, "%q has an unspecified address or port 0", e)
		case a.Addr().Zone() != "" || a.Addr().IsLinkLocalUnicast():
			c.bad(ew, "%q is link-local or has a zone: an endpoint is a routable address (link-local ones are reached on one interface only)", e)
		case okIP && a.Addr().Unmap().Is4() != ip.Is4():
			c.bad(ew, "%q is not of the service IP's family (%s)", e, ip)
		}
	}
	return proto, err == nil
}
