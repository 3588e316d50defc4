package labrun

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/causeway-net/causeway/pkg/servicelb"
)

// The lab's services (NSM_SERVICES_FILE of its proxy): over the targets
// connected to the proxy, on their ServicePort, TCP and UDP port
// servicePort of each service IP. Service IPs come from ranges the lab
// uses for nothing else (198.18.0.0/15, fd5a:1ab::/32).
var (
	servicePrefix4 = netip.MustParsePrefix("198.19.96.0/24")
	servicePrefix6 = netip.MustParsePrefix("fd5a:1ab:96::/112")
)

// servicePort is the port of the lab's services.
const servicePort = 80

// LabService is one of the lab's services.
type LabService struct {
	// Name is the service's name (namespace "lab").
	Name string
	IP   netip.Addr
	// Sticky services have ClientIP affinity.
	Sticky bool
}

// Addr is the service's IP and port.
func (s LabService) Addr() netip.AddrPort { return netip.AddrPortFrom(s.IP, servicePort) }

// LabServices are the services of the lab: echo and sticky (ClientIP
// affinity), each over IPv4 and IPv6.
var LabServices = []LabService{
	{Name: "echo", IP: netip.MustParseAddr("198.19.96.1")},
	{Name: "echo6", IP: netip.MustParseAddr("fd5a:1ab:96::1")},
	{Name: "sticky", IP: netip.MustParseAddr("198.19.96.2"), Sticky: true},
	{Name: "sticky6", IP: netip.MustParseAddr("fd5a:1ab:96::2"), Sticky: true},
}

// Services are the lab's services, none when the lab runs without.
func (l *Lab) Services() []LabService {
	if l.state().ServicePort == 0 {
		return nil
	}
	return LabServices
}

// ServiceProvider is the proxy's service load balancer provider.
func (l *Lab) ServiceProvider() string { return l.state().ServiceProvider }

func (l *Lab) servicesPath() string { return l.run.Path("services.yaml") }

// servicesYAML is the lab's services file.
func (l *Lab) servicesYAML() string {
	var b strings.Builder
	fmt.Fprintf(&b, "prefixes: [%s, %q]\nservices:\n", servicePrefix4, servicePrefix6.String())
	for _, s := range LabServices {
		fmt.Fprintf(&b, "  - namespace: lab\n    name: %s\n    ip: %q\n", s.Name, s.IP.String())
		if s.Sticky {
			b.WriteString("    affinity: ClientIP\n    affinityTimeout: 10m\n")
		}
		b.WriteString("    ports:\n")
		for _, proto := range []servicelb.Protocol{servicelb.TCP, servicelb.UDP} {
			fmt.Fprintf(&b, "      - {name: %s, port: %d, protocol: %s, targetPort: %d}\n",
				strings.ToLower(string(proto)), servicePort, proto, l.state().ServicePort)
		}
	}
	return b.String()
}

// WriteRawServices replaces the proxy's services file with yaml (the proxy
// follows the file; a broken one is refused and the last good one stays).
func (l *Lab) WriteRawServices(yaml string) error {
	return replaceFile(l.servicesPath(), yaml, "services file")
}

// serviceEnv is the proxy's environment for the lab's services.
func (l *Lab) serviceEnv() []string {
	st := l.state()
	if st.ServicePort == 0 {
		return nil
	}
	return []string{"NSM_SERVICES_FILE=" + l.servicesPath(), "NSM_SERVICE_PROVIDER=" + st.ServiceProvider}
}
