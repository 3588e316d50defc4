package clientproof

import (
	"log/slog"

	"github.com/causeway-net/causeway/internal/clock"
)

// Option configures a Prover.
type Option func(*options)

type options struct {
	clock      clock.Clock
	log        *slog.Logger
	ledgerSize int
}

// WithClock takes the time from c (default clock.Real()): the tokens'
// and certificates' lifetimes, and when the ledger forgets.
func WithClock(c clock.Clock) Option {
	return func(o *options) { o.clock = c }
}

// WithLogger logs to log (default slog.Default()): the ledger's line, at
// most once a minute, while it is full and tokens go unremembered.
func WithLogger(log *slog.Logger) Option {
	return func(o *options) { o.log = log }
}

// WithLedgerSize bounds the tokens the ledger remembers to n (default,
// and for n < 1: DefaultLedgerSize).
func WithLedgerSize(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.ledgerSize = n
		}
	}
}

func newOptions(opts []Option) options {
	o := options{clock: clock.Real(), log: slog.Default(), ledgerSize: DefaultLedgerSize}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}
