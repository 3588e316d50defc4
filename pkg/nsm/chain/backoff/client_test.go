package backoff

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/inject/injecterror"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func request(id string) *networkservice.NetworkServiceRequest {
	return &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: id}}
}

func TestDelayGrowsWithFailuresAndResets(t *testing.T) {
	c := NewClient(WithDelays(time.Second, 4*time.Second)).(*client)
	none := time.Time{}
	require.Zero(t, c.delay("a", none, false))
	fail := func(n int) {
		for range n {
			c.record("a", false, time.Now())
		}
	}
	fail(1)
	require.Equal(t, time.Second, c.delay("a", none, false))
	fail(1)
	require.Equal(t, 2*time.Second, c.delay("a", none, false))
	fail(8)
	require.Equal(t, 4*time.Second, c.delay("a", none, false), "capped")
	require.Zero(t, c.delay("b", none, false), "per connection id")
	// Never more than half of what is left of the request's deadline.
	d := c.delay("a", time.Now().Add(2*time.Second), true)
	require.LessOrEqual(t, d, time.Second)
	require.Positive(t, d)
	// A streak that ended long ago no longer delays.
	c.failures["a"].last = time.Now().Add(-time.Minute)
	require.Zero(t, c.delay("a", none, false))
}

func TestFailuresCountedAndForgotten(t *testing.T) {
	// Short pauses, but streaks that stay fresh for minutes: a loaded
	// machine's gap between two failures must not end the streak.
	bo := NewClient(WithDelays(time.Millisecond, time.Minute))
	failing := chain.NewNetworkServiceClient(bo, injecterror.NewClient())
	for range 3 {
		_, err := failing.Request(context.Background(), request("a"))
		require.Error(t, err)
	}
	require.Equal(t, 3, bo.(*client).failures["a"].n)

	ok := chain.NewNetworkServiceClient(bo)
	_, err := ok.Request(context.Background(), request("a"))
	require.NoError(t, err)
	require.NotContains(t, bo.(*client).failures, "a", "a success resets the count")

	// Heal closes and re-requests: a Close keeps the streak.
	_, err = failing.Request(context.Background(), request("b"))
	require.Error(t, err)
	_, err = ok.Close(context.Background(), &networkservice.Connection{Id: "b"})
	require.NoError(t, err)
	require.Equal(t, 1, bo.(*client).failures["b"].n)

	// Streaks of ids that stopped failing long ago are dropped.
	bo.(*client).record("c", false, time.Now().Add(time.Hour))
	require.NotContains(t, bo.(*client).failures, "b")
}

func TestPauseEndsWithTheContext(t *testing.T) {
	bo := NewClient(WithDelays(time.Hour, time.Hour))
	bo.(*client).record("a", false, time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := chain.NewNetworkServiceClient(bo).Request(ctx, request("a"))
		done <- err
	}()
	cancel()
	require.True(t, errors.Is(<-done, context.Canceled))
}

// TestPauseEndsWithTheLife: a pause ends when the client's life ends, even
// though the request's context (heal's, detached from the chain's) goes on.
func TestPauseEndsWithTheLife(t *testing.T) {
	life, stop := context.WithCancel(context.Background())
	bo := NewClient(WithDelays(time.Hour, time.Hour), WithLife(life))
	bo.(*client).record("a", false, time.Now())
	done := make(chan error)
	go func() {
		_, err := chain.NewNetworkServiceClient(bo).Request(context.Background(), request("a"))
		done <- err
	}()
	stop()
	require.ErrorIs(t, <-done, context.Canceled)
}
