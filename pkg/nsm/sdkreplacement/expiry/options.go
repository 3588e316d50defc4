package expiry

import "github.com/causeway-net/causeway/internal/clock"

// Option changes a default of NewServer.
type Option func(*options)

type options struct {
	clock clock.Clock
}

func newOptions(opts []Option) *options {
	o := &options{clock: clock.Real()}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// WithClock sets the clock that tells the time to an expiry and runs the
// waits (default clock.Real(); a *clock.Fake in tests).
func WithClock(c clock.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}
