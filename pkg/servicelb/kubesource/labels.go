package kubesource

import "k8s.io/apimachinery/pkg/labels"

// Labels read and written.
const (
	// ProxyNameLabel takes a Service (and our slices) over from kube-proxy;
	// its value names the proxy (the conduit) that serves it.
	ProxyNameLabel = "service.kubernetes.io/service-proxy-name"
	// ManagedByLabel says which controller owns an EndpointSlice; ours
	// carry ManagedBy.
	ManagedByLabel = "endpointslice.kubernetes.io/managed-by"
	// ServiceNameLabel names the Service of an EndpointSlice.
	ServiceNameLabel = "kubernetes.io/service-name"
	// NodeLabel names the node whose proxy wrote a slice (see nodeValue).
	NodeLabel = "causeway-net.github.io/node"
	// ManagedBy is the value of ManagedByLabel on Causeway's slices.
	ManagedBy = "proxy.causeway-net.github.io"
	// TriggerTimeAnnotation is when the change that a slice's write
	// carries was seen (RFC 3339), as the EndpointSlice controller writes
	// it; the readers measure the network programming latency from it.
	TriggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"
)

// serviceSelector selects the Services of proxy name.
func serviceSelector(name string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{ProxyNameLabel: name})
}

// ownSliceSelector selects the slices of proxy name written on node.
func ownSliceSelector(name, node string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{ProxyNameLabel: name, ManagedByLabel: ManagedBy, NodeLabel: nodeValue(node)})
}

// hasSelector reports whether s selects anything (an empty selector in a
// Service means "no pods", not "every pod").
func hasSelector(s map[string]string) bool { return len(s) > 0 }
