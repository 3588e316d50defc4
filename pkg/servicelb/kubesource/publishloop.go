package kubesource

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Inputs are what a running Publisher publishes from.
type Inputs struct {
	// Ready reports whether the inputs are known (the caches filled once):
	// nothing is published before, so that a start does not withdraw the
	// slices of targets not yet read.
	Ready func() bool
	// Services are the Services served (Source.Services), Targets this
	// proxy's targets (NodePods.Targets of the proxy's connections).
	Services func() []*corev1.Service
	Targets  func() []Target
	// Changed signals that Targets may answer otherwise (the proxy's
	// connections changed); Request signals the rest.
	Changed <-chan struct{}
}

// Retry bounds of a failed Publish.
const (
	retryFirst = 500 * time.Millisecond
	retryMax   = 30 * time.Second
)

// Run publishes at each Request or signal of in.Changed once in.Ready,
// and again after a failure (backing off from 0.5 s to 30 s), until ctx
// ends. A failure is logged when it starts and when it ends, not at each
// retry.
func (p *Publisher) Run(ctx context.Context, in Inputs) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	backoff := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-in.Changed:
		case <-retry.C:
		}
		if !in.Ready() {
			continue
		}
		err := p.Publish(ctx, in.Services(), in.Targets())
		switch {
		case err == nil && backoff > 0:
			p.log.Info("endpoint slices published again")
			backoff = 0
		case err != nil && ctx.Err() == nil:
			if backoff == 0 {
				p.log.Warn("endpoint slices not published; retrying", "error", err)
				backoff = retryFirst
			} else {
				backoff = min(2*backoff, retryMax)
			}
			retry.Reset(backoff)
		}
	}
}

// Request asks a running Publisher to publish; it never blocks.
func (p *Publisher) Request() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}
