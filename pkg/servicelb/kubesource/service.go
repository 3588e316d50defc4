package kubesource

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/causeway-net/causeway/pkg/servicelb"
)

// familyPart is one IP family of a Service as the model serves it.
type familyPart struct {
	family  corev1.IPFamily
	service servicelb.Service
}

// ModelName is the model's name of a Service's part of one family: the
// Service's name for its primary family (the first of ipFamilies, which
// never changes), name/IPv6 or name/IPv4 for the secondary one, so that
// both parts' ports have their own ServicePortName ("/" cannot occur in a
// Service name). The model derives port names from the reference, so the
// reference of the secondary part carries that name too (with the
// Service's UID).
func ModelName(name string, primary bool, family corev1.IPFamily) string {
	if primary {
		return name
	}
	return name + "/" + string(family)
}

// servedType reports whether svc has cluster IPs to serve (not headless, not
// ExternalName).
func servedType(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP != corev1.ClusterIPNone && svc.Spec.ClusterIP != ""
}

// Reasons of the Events on a Service for what the proxy refuses.
const (
	ReasonClusterIPNotServed = "ClusterIPNotServed"
	ReasonPortNotServed      = "PortNotServed"
)

// problem is one part of a Service left out, and why.
type problem struct {
	Reason  string
	Message string
}

func (p problem) String() string { return p.Message }

// toModel returns the parts of svc per family whose cluster IP lies in
// one of prefixes (any, when there are none), and one problem per port or
// IP left out.
func toModel(svc *corev1.Service, prefixes []netip.Prefix) ([]familyPart, []problem) {
	if !servedType(svc) {
		return nil, nil
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 {
		ips = []string{svc.Spec.ClusterIP}
	}
	ports, problems := modelPorts(svc.Spec.Ports)
	aff, ttl := affinity(svc)
	var parts []familyPart
	for i, s := range ips {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			problems = append(problems, problem{ReasonClusterIPNotServed, fmt.Sprintf("clusterIPs[%d] %q is not an IP address", i, s)})
			continue
		}
		ip = ip.Unmap()
		if len(prefixes) > 0 && !slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(ip) }) {
			problems = append(problems, problem{ReasonClusterIPNotServed,
				fmt.Sprintf("cluster IP %s is in none of the service prefixes %v that the targets route to the proxy", ip, prefixes)})
			continue
		}
		fam := familyOf(ip)
		parts = append(parts, familyPart{family: fam, service: servicelb.Service{
			Ref:             servicelb.Reference{Namespace: svc.Namespace, Name: ModelName(svc.Name, i == 0, fam), UID: string(svc.UID)},
			IP:              ip,
			Ports:           ports,
			Affinity:        aff,
			AffinityTimeout: ttl,
		}})
	}
	return parts, problems
}

// modelPorts converts the ports the model serves (TCP, UDP).
func modelPorts(in []corev1.ServicePort) ([]servicelb.ServicePort, []problem) {
	var out []servicelb.ServicePort
	var problems []problem
	for _, p := range in {
		proto, err := servicelb.ParseProtocol(string(p.Protocol))
		if p.Protocol == "" {
			proto, err = servicelb.TCP, nil
		}
		if err != nil || p.Port <= 0 || p.Port > 65535 {
			problems = append(problems, problem{ReasonPortNotServed, fmt.Sprintf("port %q %s/%d not served (TCP and UDP only)", p.Name, p.Protocol, p.Port)})
			continue
		}
		if p.TargetPort.StrVal != "" {
			problems = append(problems, problem{ReasonPortNotServed,
				fmt.Sprintf("port %q: the named targetPort %q is not resolved (the targets' ports on the secondary network have no names): no endpoints", p.Name, p.TargetPort.StrVal)})
		}
		out = append(out, servicelb.ServicePort{Name: p.Name, Port: uint16(p.Port), Protocol: proto})
	}
	return out, problems
}

// affinity is svc's session affinity and its timeout (0: the default).
func affinity(svc *corev1.Service) (servicelb.AffinityType, time.Duration) {
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		return servicelb.AffinityNone, 0
	}
	var ttl time.Duration
	if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		ttl = time.Duration(*c.ClientIP.TimeoutSeconds) * time.Second
	}
	return servicelb.AffinityClientIP, ttl
}

func familyOf(ip netip.Addr) corev1.IPFamily {
	if ip.Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}
