package leader

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// renewals wraps the Lease lock and remembers when the last write of the
// Lease naming this replica that succeeded was sent. client-go's elector
// stops leading only after its renew deadline and then an attempt to
// release the Lease (itself up to a renew deadline long, when the API
// server cannot be reached): a replica cut off from the API server would
// serve for up to twice the deadline, past the moment another may take
// the Lease. The term watches this time instead and stops serving at the
// deadline, counted from when its last renewal was sent (before the API
// server could have seen it), on the monotonic clock.
type renewals struct {
	resourcelock.Interface
	identity string

	mu   sync.Mutex
	sent time.Time
}

// Create implements resourcelock.Interface.
func (l *renewals) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.record(r, func() error { return l.Interface.Create(ctx, r) })
}

// Update implements resourcelock.Interface.
func (l *renewals) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.record(r, func() error { return l.Interface.Update(ctx, r) })
}

func (l *renewals) record(r resourcelock.LeaderElectionRecord, write func() error) error {
	start := time.Now()
	err := write()
	if err == nil && r.HolderIdentity == l.identity {
		l.mu.Lock()
		if start.After(l.sent) {
			l.sent = start
		}
		l.mu.Unlock()
	}
	return err
}

// fresh reports whether the last renewal was sent less than d ago.
func (l *renewals) fresh(d time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.sent.IsZero() && time.Since(l.sent) < d
}
