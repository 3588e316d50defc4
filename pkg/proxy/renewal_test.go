package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
)

// ipamDown makes the fake answer every Allocate with Unavailable, as a
// client that cannot reach the IPAM fails, while down is set.
func ipamDown(down *atomic.Bool) func(context.Context, string, *ipamv1.Child) error {
	return func(_ context.Context, m string, _ *ipamv1.Child) error {
		if m == "Allocate" && down.Load() {
			return status.Error(codes.Unavailable, "connection refused")
		}
		return nil
	}
}

// allocations counts the Allocate calls in the fake's log.
func allocations(e *testEnv) int {
	n := 0
	for _, c := range e.ipam.callLog() {
		if strings.HasPrefix(c, "Allocate") {
			n++
		}
	}
	return n
}

// A refresh while the IPAM is away keeps the connection as it is (an NSM
// refresh that failed would tear its data path down), for a target and an
// LB; once the IPAM is back, the leases are renewed without a request.
func TestRenewalWithoutIPAMKeepsTheConnection(t *testing.T) {
	for _, tc := range []struct {
		typ  ConnType
		conn func(string) *networkservice.Connection
	}{{TargetConn, targetConn}, {LBConn, lbConn}} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			e := newTestEnv(t)
			conn := tc.conn("c-1")
			require.NoError(t, e.p.SetIPContext(context.Background(), conn, tc.typ))
			before := proto.Clone(conn)
			stats := e.p.Stats()

			var down atomic.Bool
			down.Store(true)
			e.ipam.setHook(ipamDown(&down))
			for range 3 {
				require.NoError(t, e.p.SetIPContext(context.Background(), conn, tc.typ), "a refresh with the IPAM away")
				require.True(t, proto.Equal(before, conn), "the connection keeps its IP context")
			}
			got := e.p.Stats()
			require.Equal(t, stats.Connections, got.Connections)
			require.Equal(t, stats.Allocations, got.Allocations, "nothing released")
			require.Equal(t, uint64(3), got.RenewalsDeferred)
			require.Equal(t, 1, got.OwedRenewals)
			require.Zero(t, got.Rollbacks)
			for _, c := range e.ipam.callLog() {
				require.NotContains(t, c, "Release")
			}

			calls := allocations(e)
			down.Store(false)
			require.Eventually(t, func() bool { return e.p.Stats().OwedRenewals == 0 }, waitFor, tick,
				"the owed leases are renewed once the IPAM answers")
			require.GreaterOrEqual(t, allocations(e)-calls, 4, "two children a family renewed")
			require.True(t, proto.Equal(before, conn))
		})
	}
}

// A renewal is bounded by a part of the request's time: an IPAM that does
// not answer at all leaves the request enough time to succeed with the
// addresses held.
func TestRenewalWithAHangingIPAMAnswersInTime(t *testing.T) {
	e := newTestEnv(t)
	conn := targetConn("c-1")
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))
	before := proto.Clone(conn)
	var hang atomic.Bool
	hang.Store(true)
	e.ipam.setHook(func(ctx context.Context, m string, _ *ipamv1.Child) error {
		if m == "Allocate" && hang.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, e.p.SetIPContext(ctx, conn, TargetConn))
	require.NoError(t, ctx.Err(), "answered before the request's deadline")
	t.Logf("FIGURE: a refresh with a hanging IPAM answered after %v of a 3 s request", time.Since(start).Round(time.Millisecond))
	require.True(t, proto.Equal(before, conn))
	require.Equal(t, 1, e.p.Stats().OwedRenewals)
	hang.Store(false)
	require.Eventually(t, func() bool { return e.p.Stats().OwedRenewals == 0 }, waitFor, tick)
}

// What the IPAM refuses (it answered) still fails a renewal, and a first
// request has no addresses to keep: both fail while the IPAM is away, as
// before.
func TestRenewalKeepsOnlyWhatTheIPAMDidNotAnswer(t *testing.T) {
	e := newTestEnv(t)
	conn := lbConn("lb-1")
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, LBConn))
	e.ipam.setHook(func(_ context.Context, m string, _ *ipamv1.Child) error {
		if m == "Allocate" {
			return status.Error(codes.FailedPrecondition, "conduit is draining")
		}
		return nil
	})
	require.Error(t, e.p.SetIPContext(context.Background(), conn, LBConn), "a refusal is not an outage")
	require.Zero(t, e.p.Stats().RenewalsDeferred)

	var down atomic.Bool
	down.Store(true)
	e.ipam.setHook(ipamDown(&down))
	err := e.p.SetIPContext(context.Background(), lbConn("lb-2"), LBConn)
	require.Error(t, err, "a new connection gets no addresses while the IPAM is away")
	require.True(t, ipamUnreachable(err), "%v", err)
	require.Zero(t, e.p.Stats().RenewalsDeferred)
}

// A connection closed while its renewal is owed owes nothing: its release
// takes over, and the owed loop stops asking for it.
func TestOwedRenewalEndsWithTheRelease(t *testing.T) {
	e := newTestEnv(t)
	conn := targetConn("c-1")
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))
	var down atomic.Bool
	down.Store(true)
	e.ipam.setHook(ipamDown(&down))
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))
	require.Equal(t, 1, e.p.Stats().OwedRenewals)
	require.NoError(t, e.p.UnsetIPContext(context.Background(), conn, TargetConn))
	require.Eventually(t, func() bool { return e.p.Stats().OwedRenewals == 0 }, waitFor, tick)
	calls := allocations(e)
	time.Sleep(50 * time.Millisecond) // many owed rounds at a 1 ms retry interval
	require.Equal(t, calls, allocations(e), "no renewal of a released connection")
}

func TestIPAMUnreachable(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "down")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{unavailable, true},
		{status.Error(codes.DeadlineExceeded, "slow"), true},
		{fmt.Errorf("allocate: %w", context.DeadlineExceeded), true},
		{fmt.Errorf("allocate IPV4 %q: %w", "x-src", unavailable), true},
		{errors.Join(fmt.Errorf("a: %w", unavailable), fmt.Errorf("b: %w", context.DeadlineExceeded)), true},
		{errors.Join(fmt.Errorf("a: %w", unavailable), status.Error(codes.FailedPrecondition, "draining")), false},
		{status.Error(codes.Unknown, "bug"), false},
		{errors.New("parse"), false},
	} {
		require.Equal(t, tc.want, ipamUnreachable(tc.err), "%v", tc.err)
	}
}
