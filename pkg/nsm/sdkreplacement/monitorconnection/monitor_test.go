package monitorconnection_test

import (
	"context"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/inject/injecterror"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/sdkreplacement/monitorconnection"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// conn is a connection through an NSMgr segment to the endpoint.
func conn(id string) *networkservice.Connection {
	return &networkservice.Connection{Id: id, NetworkService: "svc", Path: &networkservice.Path{Index: 1,
		PathSegments: []*networkservice.PathSegment{{Name: "nsmgr", Id: id + "-mgr"}, {Name: "proxy", Id: id}}}}
}

// watch opens a MonitorConnections stream for the connection id (as an
// NSMgr watches each connection it forwarded) and returns its events.
func watch(t *testing.T, ctx context.Context, cc *grpc.ClientConn, id string) <-chan *networkservice.ConnectionEvent {
	t.Helper()
	stream, err := networkservice.NewMonitorConnectionClient(cc).MonitorConnections(ctx, &networkservice.MonitorScopeSelector{
		PathSegments: []*networkservice.PathSegment{{Id: id}}})
	require.NoError(t, err)
	out := make(chan *networkservice.ConnectionEvent, 16)
	go func() {
		defer close(out)
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			out <- ev
		}
	}()
	return out
}

func next(t *testing.T, evs <-chan *networkservice.ConnectionEvent) *networkservice.ConnectionEvent {
	t.Helper()
	select {
	case ev, ok := <-evs:
		require.True(t, ok, "the stream ended")
		return ev
	case <-time.After(time.Minute):
		t.Fatal("no event")
		return nil
	}
}

func requireQuiet(t *testing.T, evs <-chan *networkservice.ConnectionEvent) {
	t.Helper()
	select {
	case ev := <-evs:
		t.Fatalf("unexpected event %v", ev)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestEventsReachOnlyTheirStream: each stream gets the initial state of the
// connections it selects, then the UPDATE of each Request and the DELETE of
// each Close of its own connection only, in order; a failed Request sends
// nothing; the streams end with the endpoint's context.
func TestEventsReachOnlyTheirStream(t *testing.T) {
	chainCtx, stop := context.WithCancel(context.Background())
	defer stop()
	mon := monitorconnection.New(chainCtx)
	srv := chain.NewNetworkServiceServer(mon)
	failing := chain.NewNetworkServiceServer(mon, injecterror.NewServer())
	gs := testutil.ServeGRPC(t, "", func(s *grpc.Server) { networkservice.RegisterMonitorConnectionServer(s, mon) })
	cc := gs.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	_, err := srv.Request(ctx, &networkservice.NetworkServiceRequest{Connection: conn("a")})
	require.NoError(t, err)
	a := watch(t, ctx, cc, "a")
	b := watch(t, ctx, cc, "b")
	ev := next(t, a)
	require.Equal(t, networkservice.ConnectionEventType_INITIAL_STATE_TRANSFER, ev.GetType())
	require.Equal(t, []string{"a"}, keys(ev))
	ev = next(t, b)
	require.Equal(t, networkservice.ConnectionEventType_INITIAL_STATE_TRANSFER, ev.GetType())
	require.Empty(t, ev.GetConnections())

	for range 3 {
		_, err = srv.Request(ctx, &networkservice.NetworkServiceRequest{Connection: conn("b")})
		require.NoError(t, err)
	}
	for range 3 {
		ev = next(t, b)
		require.Equal(t, networkservice.ConnectionEventType_UPDATE, ev.GetType())
		require.Equal(t, []string{"b"}, keys(ev))
	}
	_, err = failing.Request(ctx, &networkservice.NetworkServiceRequest{Connection: conn("a")})
	require.Error(t, err)
	requireQuiet(t, a)
	requireQuiet(t, b)

	_, err = srv.Close(ctx, conn("a"))
	require.NoError(t, err)
	ev = next(t, a)
	require.Equal(t, networkservice.ConnectionEventType_DELETE, ev.GetType())
	require.Equal(t, []string{"a"}, keys(ev))
	requireQuiet(t, b)

	// A stream opened now sees b only.
	ev = next(t, watch(t, ctx, cc, ""))
	require.Equal(t, []string{"b"}, keys(ev))

	stop()
	for _, evs := range []<-chan *networkservice.ConnectionEvent{a, b} {
		select {
		case _, ok := <-evs:
			require.False(t, ok, "the stream ends with the endpoint")
		case <-time.After(time.Minute):
			t.Fatal("the stream did not end with the endpoint")
		}
	}
}

// TestSlowStreamDoesNotBlockRequests: a stream nobody reads never holds a
// Request up; its events stay queued in order.
func TestSlowStreamDoesNotBlockRequests(t *testing.T) {
	mon := monitorconnection.New(context.Background())
	srv := chain.NewNetworkServiceServer(mon)
	gs := testutil.ServeGRPC(t, "", func(s *grpc.Server) { networkservice.RegisterMonitorConnectionServer(s, mon) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := networkservice.NewMonitorConnectionClient(gs.Dial(t)).MonitorConnections(ctx, &networkservice.MonitorScopeSelector{})
	require.NoError(t, err)
	first, err := stream.Recv()
	require.NoError(t, err)
	require.Equal(t, networkservice.ConnectionEventType_INITIAL_STATE_TRANSFER, first.GetType())

	// Large connections, many of them: well beyond the stream's flow
	// control window, so that sending blocks while nobody reads.
	const n = 2000
	big := conn("x")
	big.Labels = map[string]string{"pad": string(make([]byte, 4096))}
	done := make(chan error, 1)
	go func() {
		for i := range n {
			c := big.Clone()
			c.Context = &networkservice.ConnectionContext{MTU: uint32(i)}
			if _, err := srv.Request(ctx, &networkservice.NetworkServiceRequest{Connection: c}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("requests blocked behind a stream that is not read")
	}
	for i := range n {
		ev, err := stream.Recv()
		require.NoError(t, err)
		require.Equal(t, uint32(i), ev.GetConnections()["x"].GetContext().GetMTU(), "events in order")
	}
	cancel()
	_, err = stream.Recv()
	require.Error(t, err, "the stream ends with its context")
}

func keys(ev *networkservice.ConnectionEvent) []string {
	var out []string
	for k := range ev.GetConnections() {
		out = append(out, k)
	}
	return out
}
