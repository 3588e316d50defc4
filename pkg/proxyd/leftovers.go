package proxyd

import (
	"context"
	"sync"

	"github.com/causeway-net/causeway/internal/backoff"
	"github.com/causeway-net/causeway/internal/tasks"
)

// firstTime is closed the first time something happens (a registration,
// a VIP list); later times change nothing.
type firstTime struct {
	once sync.Once
	ch   chan struct{}
}

func newFirstTime() *firstTime { return &firstTime{ch: make(chan struct{})} }

func (f *firstTime) happened() { f.once.Do(func() { close(f.ch) }) }

// wait waits for the first time; false if ctx ended first.
func (f *firstTime) wait(ctx context.Context) bool {
	select {
	case <-f.ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// startLeftoverRelease ends the dataplane's hold on the kernel state found
// at start (a restart's bridge ports, LB nexthops and VIP rules, kept
// beside what the proxy has relearned): once the endpoint is registered
// (NSM is reachable, so the connections can come back), the VIPs are known
// and NSM_LEFTOVER_HOLD has passed since, the proxy's desired state says
// so (proxy.ReleaseLeftovers). Until then a proxy restarted while NSM or
// the NSP is away keeps forwarding. A stop before that keeps the hold (the
// next run adopts the same state). A release that fails (a link of the
// earlier run that could not be deleted stays held) is tried again by the
// proxy's sync loop, as any failed Apply.
func (d *Daemon) startLeftoverRelease(ctx context.Context) (func() error, error) {
	t := tasks.New(ctx)
	t.Go(func(ctx context.Context) {
		if !d.registered.wait(ctx) || !d.vipsKnown.wait(ctx) || !backoff.Sleep(ctx, d.cfg.LeftoverHold) {
			return
		}
		d.proxy.ReleaseLeftovers()
	})
	return t.Stop, nil
}
