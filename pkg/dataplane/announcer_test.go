package dataplane

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/clock"
)

// TestAnnounceGapGrowsWithThePorts: the gap after a round is the minimum
// on a small bridge, 1 ms a port on a large one, and at most 2 s.
func TestAnnounceGapGrowsWithThePorts(t *testing.T) {
	a := newAnnouncer(3, 500*time.Millisecond, clock.Real(), nil)
	for _, tc := range []struct {
		ports int
		want  time.Duration
	}{
		{0, 100 * time.Millisecond}, {50, 100 * time.Millisecond}, {100, 100 * time.Millisecond},
		{1000, time.Second}, {2000, 2 * time.Second}, {10000, 2 * time.Second},
	} {
		require.Equal(t, tc.want, a.announceGap(tc.ports), "%d ports", tc.ports)
	}
}

// TestAnnounceStormScalesWithThePorts: a join every 5 ms for 1.2 s (a node
// filling with targets) gets rounds no closer than the gap of the bridge's
// ports: about one round per 100 ms on a small bridge, one per 300 ms on a
// bridge of 300 ports; and every burst still ends with its rounds.
func TestAnnounceStormScalesWithThePorts(t *testing.T) {
	for _, ports := range []int{10, 300} {
		var mu sync.Mutex
		var rounds []time.Time
		a := newAnnouncer(3, 50*time.Millisecond, clock.Real(), func() (bool, int) {
			mu.Lock()
			defer mu.Unlock()
			rounds = append(rounds, time.Now())
			return true, ports
		})
		a.minGap = 100 * time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); a.run(ctx) }()
		for end := time.Now().Add(1200 * time.Millisecond); time.Now().Before(end); {
			a.kick()
			time.Sleep(5 * time.Millisecond)
		}
		stormEnd := time.Now()
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(rounds) > 0 && rounds[len(rounds)-1].After(stormEnd)
		}, time.Minute, 10*time.Millisecond, "the last join is announced after the storm")
		cancel()
		<-done
		gap := a.announceGap(ports)
		mu.Lock()
		for i := 1; i < len(rounds); i++ {
			require.GreaterOrEqual(t, rounds[i].Sub(rounds[i-1]), gap-time.Millisecond, "%d ports: rounds %d and %d", ports, i-1, i)
		}
		t.Logf("FIGURE: announcement rounds in a 1.2 s storm of joins, %d ports: %d (gap %s)", ports, len(rounds), gap)
		mu.Unlock()
	}
}
