// Package filesource is the service load balancer's file source: it owns
// the proxy's services file (NSM_SERVICES_FILE), the YAML model of the
// service load balancer's services and their endpoints, its strict parsing
// and validation, its checks against the proxy's state (Facts: VIPs, bridge
// address, node subnet), and its resolution into the servicelb model, with
// the addresses of the targets connected to the proxy for the ports that ask
// for them. The file is followed with internal/yamlfile's watcher.
package filesource

import (
	"net/netip"
	"time"
)

// File is the whole services file.
type File struct {
	// Prefixes are handed to every target as routes via its gateway (the
	// proxy's bridge address of the family). Every service IP must lie in
	// one. None is shorter than servicelb.MinPrefixBits (no default route). Empty:
	// each service IP's host prefix.
	Prefixes []string  `yaml:"prefixes,omitempty"`
	Services []Service `yaml:"services"`
}

// Service is one virtual IP with its ports.
type Service struct {
	// Namespace (default "default") and Name identify the service; the pair
	// is unique in the file.
	Namespace string `yaml:"namespace,omitempty"`
	Name      string `yaml:"name"`
	// UID goes into the service's reference (events, -debug); optional.
	UID string `yaml:"uid,omitempty"`
	// IP is the service IP, IPv4 or IPv6.
	IP string `yaml:"ip"`
	// Affinity is None (default) or ClientIP.
	Affinity string `yaml:"affinity,omitempty"`
	// AffinityTimeout of ClientIP (Go duration; default 3h).
	AffinityTimeout time.Duration `yaml:"affinityTimeout,omitempty"`
	Ports           []Port        `yaml:"ports"`
}

// Port is one port of a service and where it goes.
type Port struct {
	// Name is unique within the service; it may be empty when the service
	// has one port.
	Name string `yaml:"name,omitempty"`
	// Port is the service port, Protocol TCP or UDP (any case).
	Port     uint16 `yaml:"port"`
	Protocol string `yaml:"protocol"`
	// Endpoints are address:port endpoints ("10.0.0.5:8080",
	// "[fd00::5]:8080"), of the service IP's family.
	Endpoints []string `yaml:"endpoints,omitempty"`
	// TargetPort, when set, adds every target connected to this proxy as an
	// endpoint on that port (its address of the service IP's family); the
	// endpoints follow the targets as they come and go.
	TargetPort uint16 `yaml:"targetPort,omitempty"`
}

// DefaultNamespace is the namespace of a service that names none.
const DefaultNamespace = "default"

// Summary describes f in the watcher's "configuration loaded" log line.
func (f *File) Summary() []any {
	ports := 0
	for _, s := range f.Services {
		ports += len(s.Ports)
	}
	return []any{"services", len(f.Services), "servicePorts", ports}
}

// RoutePrefixes are the prefixes handed to the targets: Prefixes, or the
// host prefix of every service IP. It is meant for a validated File.
func (f *File) RoutePrefixes() []netip.Prefix {
	var out []netip.Prefix
	if len(f.Prefixes) > 0 {
		for _, s := range f.Prefixes {
			if p, err := netip.ParsePrefix(s); err == nil {
				out = append(out, p)
			}
		}
		return out
	}
	seen := map[netip.Addr]bool{}
	for _, s := range f.Services {
		a, err := netip.ParseAddr(s.IP)
		if err != nil || seen[a.Unmap()] {
			continue
		}
		a = a.Unmap()
		seen[a] = true
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out
}
