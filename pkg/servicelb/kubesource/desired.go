package kubesource

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// desired returns the slices this proxy should have: per Service with a
// selector and per family it has, the targets of its namespace that it
// selects and that have an address of the family; a family without such
// target has no slice.
func (p *Publisher) desired(services []*corev1.Service, targets []Target) map[types.NamespacedName]*discoveryv1.EndpointSlice {
	out := map[types.NamespacedName]*discoveryv1.EndpointSlice{}
	for _, svc := range services {
		if !hasSelector(svc.Spec.Selector) || !servedType(svc) {
			continue
		}
		ports := slicePorts(svc.Spec.Ports)
		if len(ports) == 0 {
			continue
		}
		for _, fam := range families(svc) {
			s := p.slice(svc, fam, ports, selected(svc.Namespace, svc.Spec.Selector, targets))
			if len(s.Endpoints) > 0 {
				out[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
			}
		}
	}
	return out
}

// selected returns the targets of namespace that carry every label of
// sel (a Service's selector: equality only).
func selected(namespace string, sel map[string]string, targets []Target) []Target {
	var out []Target
	for _, t := range targets {
		if t.Namespace == namespace && hasLabels(t.Labels, sel) {
			out = append(out, t)
		}
	}
	return out
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if w, ok := have[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// slice builds the slice of svc for fam holding targets. Its owners are
// the pods of its endpoints: the cluster's garbage collector deletes it
// once they are all gone, which is how a node's slices go when the node is
// deleted from the cluster (its pods are deleted, its proxy is not there to
// withdraw them), as a node's Lease goes with its Node. A Service deleted
// takes its slices along through the proxies, which delete the slices of a
// Service they no longer have.
func (p *Publisher) slice(svc *corev1.Service, fam corev1.IPFamily, ports []discoveryv1.EndpointPort, targets []Target) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      SliceName(svc.Name, p.node, fam),
			Namespace: svc.Namespace,
			Labels: map[string]string{
				ServiceNameLabel: svc.Name, ManagedByLabel: ManagedBy,
				ProxyNameLabel: p.name, NodeLabel: nodeValue(p.node),
			},
		},
		AddressType: discoveryv1.AddressType(fam),
		Ports:       ports,
	}
	for _, t := range targets {
		a, ok := t.addr(fam == corev1.IPv4Protocol)
		if !ok {
			continue
		}
		s.Endpoints = append(s.Endpoints, p.endpoint(t, a))
	}
	slices.SortFunc(s.Endpoints, func(a, b discoveryv1.Endpoint) int {
		return netip.MustParseAddr(a.Addresses[0]).Compare(netip.MustParseAddr(b.Addresses[0]))
	})
	for _, e := range s.Endpoints {
		s.OwnerReferences = append(s.OwnerReferences, metav1.OwnerReference{
			APIVersion: "v1", Kind: "Pod", Name: e.TargetRef.Name, UID: e.TargetRef.UID,
		})
	}
	return s
}

// endpoint is target t at address a: ready when the pod is ready and not
// terminating, serving when ready (kube-proxy's conditions).
func (p *Publisher) endpoint(t Target, a netip.Addr) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses: []string{a.String()},
		Conditions: discoveryv1.EndpointConditions{
			Ready:       ptr.To(t.Ready && !t.Terminating),
			Serving:     ptr.To(t.Ready),
			Terminating: ptr.To(t.Terminating),
		},
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: t.Namespace, Name: t.Pod, UID: t.UID},
		NodeName:  ptr.To(p.node),
	}
}

// slicePorts are the TCP and UDP ports of a Service with their target
// port (the port itself when unset). A named target port is not resolved
// (the targets' ports on the secondary network have no names): the port
// is left out.
func slicePorts(in []corev1.ServicePort) []discoveryv1.EndpointPort {
	var out []discoveryv1.EndpointPort
	for _, sp := range in {
		proto := sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if proto != corev1.ProtocolTCP && proto != corev1.ProtocolUDP {
			continue
		}
		port := sp.TargetPort.IntVal
		switch {
		case sp.TargetPort.StrVal != "":
			continue
		case port == 0:
			port = sp.Port
		}
		out = append(out, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Protocol: ptr.To(proto), Port: ptr.To(port)})
	}
	return out
}

// families are svc's IP families: ipFamilies, or those of its cluster IPs
// when it does not say (an object written before dual-stack).
func families(svc *corev1.Service) []corev1.IPFamily {
	if len(svc.Spec.IPFamilies) > 0 {
		return svc.Spec.IPFamilies
	}
	parts, _ := toModel(svc, nil)
	out := make([]corev1.IPFamily, 0, len(parts))
	for _, p := range parts {
		out = append(out, p.family)
	}
	return out
}
