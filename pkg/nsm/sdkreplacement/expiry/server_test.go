package expiry_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/begin"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/inject/injecterror"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/causeway-net/causeway/internal/clock"
	"github.com/causeway-net/causeway/pkg/nsm/sdkreplacement/expiry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const lifetime = time.Minute

// recorder is the rest of the chain: it counts the Closes that reach it,
// per connection.
type recorder struct {
	mu     sync.Mutex
	closes map[string]int
}

func newRecorder() *recorder { return &recorder{closes: map[string]int{}} }

func (r *recorder) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	return next.Server(ctx).Request(ctx, request)
}

func (r *recorder) Close(ctx context.Context, conn *networkservice.Connection) (*emptypb.Empty, error) {
	r.mu.Lock()
	r.closes[conn.GetId()]++
	r.mu.Unlock()
	return next.Server(ctx).Close(ctx, conn)
}

func (r *recorder) closed(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closes[id]
}

// bed is the element in the chain it needs (begin, metadata), a fake clock
// and the recorder after it; more are elements between it and the
// recorder.
type bed struct {
	clk   *clock.Fake
	rec   *recorder
	chain networkservice.NetworkServiceServer
}

func newBed(chainCtx context.Context, more ...networkservice.NetworkServiceServer) *bed {
	b := &bed{clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), rec: newRecorder()}
	elements := []networkservice.NetworkServiceServer{begin.NewServer(), metadata.NewServer(),
		expiry.NewServer(chainCtx, expiry.WithClock(b.clk))}
	b.chain = chain.NewNetworkServiceServer(append(append(elements, more...), b.rec)...)
	return b
}

// request is a Request of the connection id as an NSMgr forwards it, its
// own path segment expiring lifetime from the clock's now.
func (b *bed) request(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	_, err := b.chain.Request(ctx, &networkservice.NetworkServiceRequest{Connection: conn(id, b.clk.Now().Add(lifetime))})
	require.NoError(t, err)
}

func conn(id string, expires time.Time) *networkservice.Connection {
	mgr := &networkservice.PathSegment{Name: "nsmgr", Id: id + "-mgr"}
	if !expires.IsZero() {
		mgr.Expires = timestamppb.New(expires)
	}
	return &networkservice.Connection{Id: id, Path: &networkservice.Path{Index: 1,
		PathSegments: []*networkservice.PathSegment{mgr, {Name: "proxy", Id: id}}}}
}

// TestExpiryClosesThroughTheChain: a connection that is not refreshed is
// closed through the chain once its NSMgr segment's expiry passes, not
// before, and once only.
func TestExpiryClosesThroughTheChain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newBed(ctx)
	b.request(t, context.Background(), "a")
	b.clk.Advance(lifetime - time.Second)
	require.Zero(t, b.rec.closed("a"), "closed before its expiry")
	b.clk.Advance(time.Second)
	require.Equal(t, 1, b.rec.closed("a"), "the expiry closes the connection through the chain")
	b.clk.Advance(10 * lifetime)
	require.Equal(t, 1, b.rec.closed("a"))
	require.Zero(t, b.clk.Active(), "no wait is left")
}

// TestRefreshRearms: each refresh moves the close to the new expiry; the
// earlier wait is gone.
func TestRefreshRearms(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newBed(ctx)
	b.request(t, context.Background(), "a")
	for range 3 {
		b.clk.Advance(lifetime / 2)
		b.request(t, context.Background(), "a")
		require.Equal(t, 1, b.clk.Active(), "one wait per connection")
	}
	b.clk.Advance(lifetime - time.Second)
	require.Zero(t, b.rec.closed("a"), "closed at an expiry that a refresh replaced")
	b.clk.Advance(time.Second)
	require.Equal(t, 1, b.rec.closed("a"))
}

// TestCloseCancels: a Close ends the wait; its expiry closes nothing more.
func TestCloseCancels(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newBed(ctx)
	b.request(t, context.Background(), "a")
	b.request(t, context.Background(), "b")
	_, err := b.chain.Close(context.Background(), conn("a", time.Time{}))
	require.NoError(t, err)
	require.Equal(t, 1, b.clk.Active(), "a's wait is stopped")
	b.clk.Advance(lifetime)
	require.Equal(t, 1, b.rec.closed("a"), "a is closed once, by its Close")
	require.Equal(t, 1, b.rec.closed("b"), "b expires")
}

// TestCloseFailedOnDeadlineKeepsTheWait: a Close that failed further down
// on a deadline leaves the connection to its expiry, which closes it.
func TestCloseFailedOnDeadlineKeepsTheWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newBed(ctx, injecterror.NewServer(injecterror.WithError(context.DeadlineExceeded),
		injecterror.WithRequestErrorTimes(), injecterror.WithCloseErrorTimes(0)))
	b.request(t, context.Background(), "a")
	_, err := b.chain.Close(context.Background(), conn("a", time.Time{}))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, 1, b.clk.Active(), "the wait is kept")
	b.clk.Advance(lifetime)
	require.Equal(t, 1, b.rec.closed("a"), "the expiry closes the connection")
	require.Zero(t, b.clk.Active())
}

// TestRequestTimeoutShortensTheWait: the time the Request had left when it
// arrived comes off the wait, as in the SDK's timeout server.
func TestRequestTimeoutShortensTheWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newBed(ctx)
	reqCtx, reqCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer reqCancel()
	b.request(t, reqCtx, "a")
	b.clk.Advance(lifetime - 11*time.Second)
	require.Zero(t, b.rec.closed("a"), "closed before its expiry less the request's time")
	b.clk.Advance(2 * time.Second)
	require.Equal(t, 1, b.rec.closed("a"), "the wait is the expiry less the request's remaining time")
}

// TestNoExpiryIsInvalid: a previous path segment without an expiry fails
// the Request with InvalidArgument and arms nothing.
func TestNoExpiryIsInvalid(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newBed(ctx)
	_, err := b.chain.Request(context.Background(), &networkservice.NetworkServiceRequest{Connection: conn("a", time.Time{})})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	require.Zero(t, b.clk.Active())
}

// TestChainEndStopsTheWaits: once the chain's context ends, no expiry
// closes a connection and no timer is left.
func TestChainEndStopsTheWaits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	b := newBed(ctx)
	for i := range 10 {
		b.request(t, context.Background(), fmt.Sprint(i))
	}
	cancel()
	require.Eventually(t, func() bool { return b.clk.Active() == 0 }, time.Minute, 10*time.Millisecond,
		"the chain's end stops every timer")
	b.clk.Advance(lifetime)
	for i := range 10 {
		require.Zero(t, b.rec.closed(fmt.Sprint(i)))
	}
}

// TestNoGoroutinePerConnection: waiting connections hold no goroutine (the
// SDK's timeout server holds one each).
func TestNoGoroutinePerConnection(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newBed(ctx)
	const n = 200
	before := runtime.NumGoroutine()
	for i := range n {
		b.request(t, context.Background(), fmt.Sprint(i))
	}
	require.Equal(t, n, b.clk.Active())
	// begin's executors end their goroutines once idle.
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+2 }, time.Minute, 10*time.Millisecond,
		"%d goroutines with %d waiting connections, %d before", runtime.NumGoroutine(), n, before)
	t.Logf("FIGURE: %d goroutines with %d waiting connections, %d before", runtime.NumGoroutine(), n, before)
}

// TestConcurrentRequestsAndCloses on the real clock, under -race: many
// connections requested, refreshed and closed at once, some expiring
// meanwhile; each is closed through the chain exactly once.
func TestConcurrentRequestsAndCloses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := newRecorder()
	srv := chain.NewNetworkServiceServer(begin.NewServer(), metadata.NewServer(), expiry.NewServer(ctx), rec)
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprint(i)
			// Every fourth expires at once; the rest after a minute.
			life := lifetime
			if i%4 == 0 {
				life = 0
			}
			for range 3 {
				_, err := srv.Request(context.Background(), &networkservice.NetworkServiceRequest{Connection: conn(id, time.Now().Add(life))})
				assert.NoError(t, err)
			}
			if i%4 != 0 {
				_, err := srv.Close(context.Background(), conn(id, time.Time{}))
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		for i := range n {
			if rec.closed(fmt.Sprint(i)) == 0 {
				return false
			}
		}
		return true
	}, time.Minute, 10*time.Millisecond, "every connection is closed")
	for i := range n {
		if i%4 != 0 {
			require.Equal(t, 1, rec.closed(fmt.Sprint(i)), "connection %d closed more than once", i)
		}
	}
}

// TestFailedRefreshKeepsTheWait: a refresh that fails further down arms
// nothing new; the earlier expiry still closes the connection.
func TestFailedRefreshKeepsTheWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newBed(ctx, injecterror.NewServer(injecterror.WithRequestErrorTimes(1), injecterror.WithCloseErrorTimes()))
	b.request(t, context.Background(), "a")
	b.clk.Advance(lifetime / 2)
	_, err := b.chain.Request(context.Background(), &networkservice.NetworkServiceRequest{Connection: conn("a", b.clk.Now().Add(lifetime))})
	require.Error(t, err, "the refresh fails")
	require.Equal(t, 1, b.clk.Active(), "the first wait is kept")
	b.clk.Advance(lifetime / 2)
	require.Equal(t, 1, b.rec.closed("a"), "the first expiry closes the connection")
}
