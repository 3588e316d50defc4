package authorize

import (
	"log/slog"

	"github.com/causeway-net/causeway/internal/clock"
)

// Option changes a default of NewServer and NewClient.
type Option func(*options)

type options struct {
	any   bool
	clock clock.Clock
	log   *slog.Logger
}

func newOptions(opts []Option) *options {
	o := &options{clock: clock.Real(), log: slog.Default()}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// Any authorizes every Request and Close: no policy is checked.
func Any() Option {
	return func(o *options) { o.any = true }
}

// WithClock sets the clock that tells whether a token has expired (default
// clock.Real()).
func WithClock(c clock.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithLogger sets the logger of refusals (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}
