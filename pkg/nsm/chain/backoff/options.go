package backoff

import (
	"context"
	"time"
)

// Defaults of the pause after failed requests.
const (
	DefaultInitial = 100 * time.Millisecond
	DefaultMax     = 5 * time.Second
)

// Option configures the element.
type Option func(*options)

type options struct {
	initial, max time.Duration
	life         context.Context
}

// WithDelays sets the pause after the first failure and its cap.
func WithDelays(initial, maxDelay time.Duration) Option {
	return func(o *options) {
		if initial > 0 {
			o.initial = initial
		}
		if maxDelay >= o.initial {
			o.max = maxDelay
		}
	}
}

// WithLife ends every pause when life ends too, not only when the
// request's context does: the SDK's heal re-requests with a context that
// begin detached from the chain's, so a pause taken by a heal that runs
// when its chain stops would otherwise outlive the chain by up to the cap.
func WithLife(life context.Context) Option {
	return func(o *options) { o.life = life }
}
