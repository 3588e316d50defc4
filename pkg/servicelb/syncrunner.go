package servicelb

import (
	"context"
	"time"

	"github.com/causeway-net/causeway/internal/backoff"
)

// SyncRunner runs a function on request, never more often than once per
// minInterval, and at least once per maxInterval (0: only on request).
// Requests that arrive while a run is pending coalesce into it.
type SyncRunner struct {
	fn          func()
	minInterval time.Duration
	maxInterval time.Duration
	kick        chan struct{}
}

// NewSyncRunner returns a runner of fn; Run must be called to start it.
func NewSyncRunner(fn func(), minInterval, maxInterval time.Duration) *SyncRunner {
	return &SyncRunner{fn: fn, minInterval: minInterval, maxInterval: maxInterval, kick: make(chan struct{}, 1)}
}

// Request asks for a run soon; it never blocks.
func (r *SyncRunner) Request() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run runs fn once, then on request or period, until ctx ends.
func (r *SyncRunner) Run(ctx context.Context) {
	var periodic <-chan time.Time
	if r.maxInterval > 0 {
		t := time.NewTicker(r.maxInterval)
		defer t.Stop()
		periodic = t.C
	}
	last := time.Time{}
	for {
		if wait := r.minInterval - time.Since(last); !last.IsZero() && wait > 0 && !backoff.Sleep(ctx, wait) {
			return
		}
		// Requests made until now are served by this run.
		select {
		case <-r.kick:
		default:
		}
		last = time.Now()
		r.fn()
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-periodic:
		}
	}
}
