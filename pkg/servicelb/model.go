package servicelb

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"
)

// Protocol is the transport protocol of a service port.
type Protocol string

// The protocols a service port can have.
const (
	TCP Protocol = "TCP"
	UDP Protocol = "UDP"
)

// ParseProtocol accepts tcp or udp in any case.
func ParseProtocol(s string) (Protocol, error) {
	switch strings.ToUpper(s) {
	case string(TCP):
		return TCP, nil
	case string(UDP):
		return UDP, nil
	}
	return "", fmt.Errorf("unknown protocol %q (want TCP or UDP)", s)
}

// AffinityType is the session affinity of a service.
type AffinityType string

// The session affinities. The empty value means "not set" (None when a
// service is created, "keep what is there" when NewService updates one).
const (
	AffinityNone     AffinityType = "None"
	AffinityClientIP AffinityType = "ClientIP"
)

// DefaultAffinityTimeout is the ClientIP affinity timeout used when a
// service gives none (as the Kubernetes default, three hours).
const DefaultAffinityTimeout = 3 * time.Hour

// Reference names the object a service port comes from; sockets, rules and
// events keep it so that what happens can be traced back to its origin.
type Reference struct {
	Namespace string `yaml:"namespace" json:"namespace"`
	Name      string `yaml:"name" json:"name"`
	UID       string `yaml:"uid" json:"uid"`
}

func (r Reference) String() string {
	if r.UID == "" {
		return r.Namespace + "/" + r.Name
	}
	return r.Namespace + "/" + r.Name + "(" + r.UID + ")"
}

// ServicePortName identifies one port of a service: namespace/name and the
// port's name (possibly empty).
type ServicePortName struct {
	Namespace string
	Name      string
	Port      string
}

// String is ns/name:port, or ns/name when the port has no name.
func (n ServicePortName) String() string {
	if n.Port == "" {
		return n.Namespace + "/" + n.Name
	}
	return n.Namespace + "/" + n.Name + ":" + n.Port
}

// ServicePort is one port of a service.
type ServicePort struct {
	Name     string   `yaml:"name"`
	Port     uint16   `yaml:"port"`
	Protocol Protocol `yaml:"protocol"`
}

// Service is a virtual IP with ports, spread over the endpoints of the
// Endpoints object with the same namespace/name.
type Service struct {
	Ref             Reference     `yaml:"ref"`
	IP              netip.Addr    `yaml:"ip"`
	Ports           []ServicePort `yaml:"ports"`
	Affinity        AffinityType  `yaml:"affinity"`
	AffinityTimeout time.Duration `yaml:"affinityTimeout"`
}

// ServicePortInfo is everything a provider needs about one service port.
type ServicePortInfo struct {
	Name     ServicePortName
	Ref      Reference
	IP       netip.Addr
	Port     uint16
	Protocol Protocol
	Affinity AffinityType
	// AffinityTimeout is set (DefaultAffinityTimeout when the service gave
	// none) only when Affinity is ClientIP.
	AffinityTimeout time.Duration
}

// Addr is the service's IP:port.
func (i ServicePortInfo) Addr() netip.AddrPort { return netip.AddrPortFrom(i.IP, i.Port) }

// SameConfig reports whether a socket or rule built for i still serves j:
// the protocol, IP, port and affinity type must be equal (a changed
// affinity timeout alone does not reopen anything).
func (i ServicePortInfo) SameConfig(j ServicePortInfo) bool {
	return i.Protocol == j.Protocol && i.IP == j.IP && i.Port == j.Port && i.Affinity == j.Affinity
}

// PortInfos returns the service's ports, normalised (affinity None when
// unset, the default timeout for ClientIP without one). A service without a
// valid IP has no ports (it is not served).
func (s Service) PortInfos() []ServicePortInfo {
	if !s.IP.IsValid() || s.IP.IsUnspecified() {
		return nil
	}
	aff, ttl := s.Affinity, s.AffinityTimeout
	if aff == "" {
		aff = AffinityNone
	}
	if aff != AffinityClientIP {
		ttl = 0
	} else if ttl <= 0 {
		ttl = DefaultAffinityTimeout
	}
	out := make([]ServicePortInfo, 0, len(s.Ports))
	for _, p := range s.Ports {
		out = append(out, ServicePortInfo{
			Name:            ServicePortName{Namespace: s.Ref.Namespace, Name: s.Ref.Name, Port: p.Name},
			Ref:             s.Ref,
			IP:              s.IP.Unmap(),
			Port:            p.Port,
			Protocol:        p.Protocol,
			Affinity:        aff,
			AffinityTimeout: ttl,
		})
	}
	return out
}

// PortsByName returns the served ports of services by name; a port of
// another protocol than TCP or UDP is logged and skipped.
func PortsByName(services []Service, log *slog.Logger) map[ServicePortName]ServicePortInfo {
	out := make(map[ServicePortName]ServicePortInfo)
	for _, s := range services {
		for _, pi := range s.PortInfos() {
			if pi.Protocol != TCP && pi.Protocol != UDP {
				log.Warn("service port skipped", "service", pi.Name.String(), "protocol", string(pi.Protocol))
				continue
			}
			out[pi.Name] = pi
		}
	}
	return out
}

// EndpointPort is the addresses serving one named port of a service.
type EndpointPort struct {
	Name      string           `yaml:"name"`
	Addresses []netip.AddrPort `yaml:"addresses"`
}

// Endpoints is the set of endpoints of the service with the same
// namespace/name.
type Endpoints struct {
	Namespace string         `yaml:"namespace"`
	Name      string         `yaml:"name"`
	Ports     []EndpointPort `yaml:"ports"`
}

// ByPort flattens e into its service port names and their valid endpoints
// (address set and port non-zero), in order; duplicates are kept. A port
// without any valid endpoint does not appear.
func (e Endpoints) ByPort() map[ServicePortName][]netip.AddrPort {
	out := make(map[ServicePortName][]netip.AddrPort)
	for _, p := range e.Ports {
		name := ServicePortName{Namespace: e.Namespace, Name: e.Name, Port: p.Name}
		for _, a := range p.Addresses {
			if !ValidEndpoint(a) {
				continue
			}
			out[name] = append(out[name], netip.AddrPortFrom(a.Addr().Unmap(), a.Port()))
		}
	}
	return out
}

// ValidEndpoint reports whether a can be dialled: an address that is neither
// unset nor unspecified, and a port.
func ValidEndpoint(a netip.AddrPort) bool {
	return a.Addr().IsValid() && !a.Addr().IsUnspecified() && a.Port() != 0
}

// ServiceHandler receives the full list of services each time it changes.
type ServiceHandler interface {
	OnServiceUpdate(services []Service)
}

// EndpointsHandler receives the full list of endpoints each time it
// changes. Its method name differs from ServiceHandler's so that one type
// can implement both.
type EndpointsHandler interface {
	OnEndpointsUpdate(endpoints []Endpoints)
}
