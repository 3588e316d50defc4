package backoff

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDoublesUpToTheCapAndResets(t *testing.T) {
	b := New(100*time.Millisecond, time.Second)
	var got []time.Duration
	for range 6 {
		got = append(got, b.Next())
	}
	ms := time.Millisecond
	require.Equal(t, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}, got)
	b.Reset()
	require.Equal(t, 100*ms, b.Next())
}

func TestCapBelowInitial(t *testing.T) {
	b := New(time.Second, time.Millisecond)
	require.Equal(t, time.Second, b.Next())
	require.Equal(t, time.Second, b.Next())
}

func TestWaitEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.False(t, New(time.Hour, time.Hour).Wait(ctx))
	require.True(t, Sleep(context.Background(), time.Millisecond))
}
