package kubesource

import (
	"log/slog"
	"net/netip"

	"github.com/causeway-net/causeway/internal/limits"
)

// Option configures a Source, a Publisher or NodePods.
type Option func(*options)

type options struct {
	log       *slog.Logger
	prefixes  []netip.Prefix
	eventNode string
	changed   func()
	pools     []netip.Prefix
	maxSvcs   int
	nsList    []string
	refusals  *limits.Refusals
	identity  identityCheck
}

// WithLogger logs to log (default slog.Default()).
func WithLogger(log *slog.Logger) Option {
	return func(o *options) { o.log = log }
}

// WithPrefixes makes a Source serve only the cluster IPs inside prefixes
// (the service prefixes the targets route to the proxy); the others are
// refused. None (the default): every cluster IP is served.
func WithPrefixes(prefixes []netip.Prefix) Option {
	return func(o *options) { o.prefixes = prefixes }
}

// WithEndpointPools keeps a Source's endpoints inside pools (the
// conduit's, where its targets' addresses come from): an endpoint outside
// is ignored and logged once. None (the default): not bounded to pools;
// loopback, link-local, multicast and unspecified endpoints are ignored
// either way.
func WithEndpointPools(pools []netip.Prefix) Option {
	return func(o *options) { o.pools = pools }
}

// WithMaxServices makes a Source serve at most max Services (each a
// route pushed to every target, an Event per node, memory in the proxy):
// a Service past it is not served, its refusal counted in refusals and
// logged once; it is served at a later change of it that finds room.
// Zero: no bound.
func WithMaxServices(max int, refusals *limits.Refusals) Option {
	return func(o *options) { o.maxSvcs, o.refusals = max, refusals }
}

// WithNamespaces makes a Source serve only the Services of namespaces (an
// opt-in list: a Service labelled for the conduit elsewhere is ignored).
// None (the default): every namespace.
func WithNamespaces(namespaces []string) Option {
	return func(o *options) { o.nsList = namespaces }
}

// WithEvents makes a Source write an Event on each Service for what it
// refuses, reported by the proxy of node (see events.go).
func WithEvents(node string) Option {
	return func(o *options) { o.eventNode = node }
}

// WithServicesChanged makes a Source call f after each delivery that
// changed the Services (Source.Services answers otherwise): a Publisher's
// Request.
func WithServicesChanged(f func()) Option {
	return func(o *options) { o.changed = f }
}

func newOptions(opts []Option) options {
	o := options{log: slog.Default(), changed: func() {}}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}
