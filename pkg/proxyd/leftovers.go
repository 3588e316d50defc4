package proxyd

import (
	"context"
	"time"

	"github.com/causeway-net/causeway/internal/backoff"
)

// leftoverPoll is how often the release waits check the registration.
const leftoverPoll = 200 * time.Millisecond

// startLeftoverRelease ends the dataplane's hold on the kernel state found
// at start (a restart's bridge ports, LB nexthops and VIP rules, kept
// beside what the proxy has relearned): once the endpoint is registered
// (NSM is reachable, so the connections can come back), the VIPs are known
// and NSM_LEFTOVER_HOLD has passed since. Until then a proxy restarted
// while NSM or the NSP is away keeps forwarding. A stop before that keeps
// the hold (the next run adopts the same state).
func (d *Daemon) startLeftoverRelease(ctx context.Context) (func() error, error) {
	t := newTasks(ctx)
	t.Go(func(ctx context.Context) {
		if !d.waitRegistered(ctx) || !wait(ctx, d.vipsKnownCh) || !backoff.Sleep(ctx, d.cfg.LeftoverHold) {
			return
		}
		if err := d.dp.ReleaseLeftovers(); err != nil {
			d.log.Warn("release of the kernel state found at start failed", "error", err)
		}
	})
	return t.stop, nil
}

// waitRegistered waits until the endpoint is registered; false if ctx
// ended first.
func (d *Daemon) waitRegistered(ctx context.Context) bool {
	tick := time.NewTicker(leftoverPoll)
	defer tick.Stop()
	for !d.ep.Registered() {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// wait waits for ch to close; false if ctx ended first.
func wait(ctx context.Context, ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}
