package fullmesh

import (
	"log/slog"
	"maps"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"

	"github.com/causeway-net/causeway/internal/clock"
)

// Option configures a FullMesh.
type Option func(*options)

type options struct {
	labels         map[string]string
	requestTimeout time.Duration
	closeTimeout   time.Duration
	retryInterval  time.Duration
	expiryInterval time.Duration
	expiryGrace    time.Duration
	relistGrace    time.Duration
	backoffInitial time.Duration
	backoffMax     time.Duration
	pinner         *Pinner
	recovery       networkservice.MonitorConnectionClient
	withdraw       func(*networkservice.Connection)
	leaveOnStop    bool
	logger         *slog.Logger
	clock          clock.Clock
}

func newOptions(opts []Option) *options {
	o := &options{
		requestTimeout: 15 * time.Second,
		retryInterval:  5 * time.Second,
		expiryInterval: 5 * time.Second,
		expiryGrace:    30 * time.Second,
		relistGrace:    time.Minute,
		backoffInitial: 500 * time.Millisecond,
		backoffMax:     15 * time.Second,
		logger:         slog.Default(),
		clock:          clock.Real(),
	}
	for _, opt := range opts {
		opt(o)
	}
	if o.closeTimeout == 0 {
		o.closeTimeout = o.requestTimeout
	}
	return o
}

// WithLabels sets the labels of every request (copied).
func WithLabels(labels map[string]string) Option {
	return func(o *options) { o.labels = maps.Clone(labels) }
}

// WithRequestTimeout bounds each Request (default 15s). Requests do not
// inherit the mesh's cancellation: an in-flight Request is finished, then
// closed if its endpoint went away meanwhile.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) { o.requestTimeout = d }
}

// WithWithdraw sets a function called with a connection as soon as the mesh
// decides to close it (its endpoint went, or the mesh stops), before the
// Close. The Close of a connection waits behind anything in flight on it (a
// heal's re-request of a dead endpoint, with its pause), which can take
// seconds; the function takes the connection out of the data path at once.
func WithWithdraw(fn func(*networkservice.Connection)) Option {
	return func(o *options) { o.withdraw = fn }
}

// WithLeaveOnStop makes the mesh, when it stops, leave its connections
// established: no withdraw, no Close. The kernel keeps their interfaces and
// the NSMgr, the forwarder and the endpoints keep the connections until a
// new run of the client resumes them (WithRecovery) or, if none comes,
// their tokens expire. Connections whose endpoint went away are still
// closed. Without it, the mesh closes every connection when it stops.
func WithLeaveOnStop() Option {
	return func(o *options) { o.leaveOnStop = true }
}

// WithCloseTimeout bounds each Close (default: the request timeout).
func WithCloseTimeout(d time.Duration) Option {
	return func(o *options) { o.closeTimeout = d }
}

// WithRetryInterval sets the wait between failed Requests to an endpoint
// (default 5s).
func WithRetryInterval(d time.Duration) Option {
	return func(o *options) { o.retryInterval = d }
}

// WithExpiry sets how often registrations are checked for expiry (default
// 5s) and how long after its ExpirationTime an endpoint that got no refresh
// is treated as deleted (default 30s).
func WithExpiry(interval, grace time.Duration) Option {
	return func(o *options) {
		o.expiryInterval = interval
		o.expiryGrace = grace
	}
}

// WithRelistGrace sets how long an endpoint whose registration expiry is
// unknown is kept when a listing after a reconnect of the watch misses it
// (default 1m, NSM's default registration period). An endpoint with a known
// expiry is kept until that expiry, and at least one registration lifetime
// (that expiry less the time it was listed) after the listing missed it.
func WithRelistGrace(d time.Duration) Option {
	return func(o *options) { o.relistGrace = d }
}

// WithWatchBackoff sets the first and the longest wait before the registry
// watch is opened again after it broke (defaults 500ms and 15s).
func WithWatchBackoff(initial, maxWait time.Duration) Option {
	return func(o *options) {
		o.backoffInitial = initial
		o.backoffMax = maxWait
	}
}

// WithPinner makes the mesh pin each connection id to its endpoint in p, an
// element that must also be part of the client chain.
func WithPinner(p *Pinner) Option {
	return func(o *options) { o.pinner = p }
}

// WithRecovery makes the mesh look, before the first Request to an
// endpoint, for a connection with the same id left in the NSMgr by a
// previous run of the proxy (asking states, the NSMgr's MonitorConnection
// service), and resume it: its first Request refreshes that connection on
// its data path (the same path and interface, which the forwarder keeps);
// if that fails, the next ones reselect it, so that the forwarder replaces
// its interfaces instead of leaving stale ones behind.
func WithRecovery(states networkservice.MonitorConnectionClient) Option {
	return func(o *options) { o.recovery = states }
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}
