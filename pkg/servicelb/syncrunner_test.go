package servicelb

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSyncRunner(t *testing.T) {
	var runs atomic.Int32
	release := make(chan struct{})
	r := NewSyncRunner(func() {
		if runs.Add(1) == 1 {
			<-release // the first run lasts until the burst is made
		}
	}, 50*time.Millisecond, 0)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.Run(ctx)
	}()
	require.Eventually(t, func() bool { return runs.Load() == 1 }, time.Minute, time.Millisecond, "first run at start")
	// A burst made during a run coalesces into one run after it (made
	// between runs, a busy machine could split it over two).
	for range 100 {
		r.Request()
	}
	close(release)
	require.Eventually(t, func() bool { return runs.Load() == 2 }, time.Minute, time.Millisecond)
	time.Sleep(120 * time.Millisecond)
	require.Equal(t, int32(2), runs.Load(), "coalesced requests ran more than once")
	cancel()
	wg.Wait()
}

func TestSyncRunnerPeriodic(t *testing.T) {
	var runs atomic.Int32
	r := NewSyncRunner(func() { runs.Add(1) }, time.Millisecond, 10*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	require.Eventually(t, func() bool { return runs.Load() >= 3 }, time.Minute, time.Millisecond, "runs every period")
	cancel()
	<-done
}
