package proxyd

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// releaseOnly is a Dataplane of which only ReleaseLeftovers is called.
type releaseOnly struct {
	Dataplane
	mu      sync.Mutex
	calls   int
	failing int // fail that many calls first
}

func (r *releaseOnly) ReleaseLeftovers() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.failing > 0 {
		r.failing--
		return errors.New("injected: a held link could not be deleted")
	}
	return nil
}

func (r *releaseOnly) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// A release of the leftovers that fails (a link of the earlier run that
// could not be deleted stays held) is tried again until it succeeds.
func TestLeftoverReleaseIsRetriedUntilItSucceeds(t *testing.T) {
	r := &releaseOnly{failing: 1}
	d := &Daemon{cfg: &Config{}, log: slog.New(slog.DiscardHandler), dp: r,
		registered: newFirstTime(), vipsKnown: newFirstTime()}
	stop, err := d.startLeftoverRelease(context.Background())
	require.NoError(t, err)
	defer func() { require.NoError(t, stop()) }()
	d.registered.happened()
	d.vipsKnown.happened()
	require.Eventually(t, func() bool { return r.count() == 2 }, 20*time.Second, 10*time.Millisecond)
}
