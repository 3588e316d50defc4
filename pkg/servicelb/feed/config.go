// Package feed runs the service load balancer in the proxy, as kube-proxy's
// proxier is run: it starts the provider the configuration names, feeds it
// from its source (the services file joined with the proxy's connected
// targets, or the Kubernetes API with this node's pods and the
// EndpointSlices it publishes), hands the proxy the service prefixes its
// targets need and the hairpin the nftables provider needs, and reports
// its state (-debug) and metrics. pkg/proxyd only configures and starts it.
package feed

import (
	"net/netip"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/kubesource"
)

// Config is what the load balancer runs with.
type Config struct {
	// Provider is the provider's name (servicelb.ProviderUserspace or
	// servicelb.ProviderNftables); NetNS the namespace it works in (as
	// provider.Config's).
	Provider string
	NetNS    netns.NsHandle
	// SyncPeriod, PortRange and UDPIdleTimeout are the provider's.
	SyncPeriod     time.Duration
	PortRange      servicelb.PortRange
	UDPIdleTimeout time.Duration
	// MaxConnectionsPerClient bounds the TCP connections of one client
	// through the userspace provider (0: relay.DefaultMaxPerClient).
	MaxConnectionsPerClient int
	// File is the services file; the source when Kube is nil.
	File string
	// Kube, when set, is the Kubernetes source.
	Kube *Kube
}

// Kube is the Kubernetes source's configuration.
type Kube struct {
	// Client is the API server's client; nil: one from Kubeconfig, or the
	// pod's service account when that is empty.
	Client     kubesource.Client
	Kubeconfig string
	// ProxyName is the service-proxy-name the Services are labelled with;
	// Node this node's name.
	ProxyName, Node string
	// Prefixes are the routes handed to the targets; empty: each service
	// IP's host prefix.
	Prefixes []netip.Prefix
	// Pools are the conduit's address pools: endpoints outside are
	// ignored (kubesource.WithEndpointPools).
	Pools []netip.Prefix
	// MaxServices bounds the Services served (kubesource.WithMaxServices).
	MaxServices int
	// Namespaces, when not empty, are the only namespaces served
	// (kubesource.WithNamespaces).
	Namespaces []string
	// IDScheme is how a target's proved SPIFFE ID must name the pod it
	// claims to be published, in the trust domain TrustDomain returns
	// (kubesource.WithTargetIdentity); "" or off: not checked.
	IDScheme    kubesource.IDScheme
	TrustDomain func() spiffeid.TrustDomain
}
