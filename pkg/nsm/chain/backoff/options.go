package backoff

import "time"

// Defaults of the pause after failed requests.
const (
	DefaultInitial = 100 * time.Millisecond
	DefaultMax     = 5 * time.Second
)

// Option configures the element.
type Option func(*options)

type options struct {
	initial, max time.Duration
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
