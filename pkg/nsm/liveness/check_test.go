package liveness_test

import (
	"context"
	"errors"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/causeway-net/causeway/pkg/nsm/liveness"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeNSMgr answers with the given connections, or fails as an NSMgr that is
// away does.
type fakeNSMgr struct {
	away  bool
	conns map[string]*networkservice.Connection
	asked *networkservice.MonitorScopeSelector
}

func (m *fakeNSMgr) MonitorConnections(_ context.Context, sel *networkservice.MonitorScopeSelector, _ ...grpc.CallOption) (networkservice.MonitorConnection_MonitorConnectionsClient, error) {
	m.asked = sel
	if m.away {
		return nil, errors.New("connection refused")
	}
	return &stream{ev: &networkservice.ConnectionEvent{Type: networkservice.ConnectionEventType_INITIAL_STATE_TRANSFER, Connections: m.conns}}, nil
}

type stream struct {
	grpc.ClientStream
	ev *networkservice.ConnectionEvent
}

func (s *stream) Recv() (*networkservice.ConnectionEvent, error) { return s.ev, nil }

func connection(state networkservice.State) *networkservice.Connection {
	return &networkservice.Connection{Id: "c1", State: state, Path: &networkservice.Path{
		PathSegments: []*networkservice.PathSegment{{Id: "c1", Name: "proxy"}, {Id: "m1", Name: "nsmgr"}},
	}}
}

// An NSMgr that answers is believed; one that does not leaves the data path
// alone unless its link is gone.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	lost := false
	mon := &fakeNSMgr{}
	check := liveness.Check(mon, func(*networkservice.Connection) bool { return lost }, nil)
	conn := connection(networkservice.State_UP)

	mon.away = true
	require.True(t, check(ctx, conn), "NSMgr away: keep the data path")
	require.Equal(t, "c1", mon.asked.GetPathSegments()[0].GetId(), "asked about our own path segment")

	mon.away = false
	mon.conns = map[string]*networkservice.Connection{"m1": connection(networkservice.State_DOWN)}
	require.False(t, check(ctx, conn), "NSMgr answers: down")
	mon.conns = map[string]*networkservice.Connection{}
	require.False(t, check(ctx, conn), "NSMgr answers: it does not know the connection")
	mon.conns = map[string]*networkservice.Connection{"m1": connection(networkservice.State_UP)}
	require.True(t, check(ctx, conn), "NSMgr answers: up")

	lost = true
	mon.away = true
	require.False(t, check(ctx, conn), "the link is gone: nothing to keep")
}
