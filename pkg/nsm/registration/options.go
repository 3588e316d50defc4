package registration

import (
	"log/slog"
	"time"
)

// Option changes a default of Start.
type Option func(*options)

type options struct {
	firstTimeout time.Duration
	tryTimeout   time.Duration
	minRefresh   time.Duration
	retryInitial time.Duration
	retryMax     time.Duration
	onChange     func(registered bool)
	logger       *slog.Logger
}

func newOptions(opts []Option) *options {
	o := &options{
		firstTimeout: 15 * time.Second,
		tryTimeout:   2 * time.Second,
		minRefresh:   200 * time.Millisecond,
		retryInitial: 250 * time.Millisecond,
		retryMax:     5 * time.Second,
		onChange:     func(bool) {},
		logger:       slog.Default(),
	}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// WithFirstTimeout bounds the retries of the first registration, which
// Start waits for (default 15s).
func WithFirstTimeout(d time.Duration) Option { return func(o *options) { o.firstTimeout = d } }

// WithoutFirstWait makes Start return at once: the first registration is
// made, and retried without end, in the keeper's goroutine (Registered and
// the WithOnChange function tell when it succeeds). For an owner that
// must run while the registry is away, such as a proxy restarted during
// an NSM outage.
func WithoutFirstWait() Option { return func(o *options) { o.firstTimeout = 0 } }

// WithTryTimeout bounds each try (default 2s). A try is ended by
// cancellation, never by a deadline: the registry's expire element would
// take a deadline off the granted expiration and could expire the
// endpoint at once.
func WithTryTimeout(d time.Duration) Option { return func(o *options) { o.tryTimeout = d } }

// WithRetryBackoff sets the first and the longest wait between failed
// tries (defaults 250ms and 5s).
func WithRetryBackoff(initial, maxWait time.Duration) Option {
	return func(o *options) {
		o.retryInitial = initial
		o.retryMax = maxWait
	}
}

// WithOnChange is called (from the keeper's goroutine, or from Start for
// the first registration) each time the registration is lost or regained.
func WithOnChange(fn func(registered bool)) Option {
	return func(o *options) {
		if fn != nil {
			o.onChange = fn
		}
	}
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}
