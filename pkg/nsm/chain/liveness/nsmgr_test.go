package liveness_test

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/inject/injecterror"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/chain/liveness"
)

// nsmgrRun is one run of a fake NSMgr's MonitorConnection service: it answers
// every stream with the connections it knows, keyed by its own ids.
type nsmgrRun struct {
	mu    sync.Mutex
	conns map[string]*networkservice.Connection
	asked atomic.Int32 // streams served
}

func (r *nsmgrRun) know(conns map[string]*networkservice.Connection) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conns = conns
}

func (r *nsmgrRun) MonitorConnections(_ *networkservice.MonitorScopeSelector, srv networkservice.MonitorConnection_MonitorConnectionsServer) error {
	r.asked.Add(1)
	r.mu.Lock()
	ev := &networkservice.ConnectionEvent{Type: networkservice.ConnectionEventType_INITIAL_STATE_TRANSFER, Connections: r.conns}
	err := srv.Send(ev)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	<-srv.Context().Done()
	return nil
}

// serveRun starts a run of the fake NSMgr on the unix socket sock.
func serveRun(t *testing.T, sock string) (*nsmgrRun, *testutil.GRPCServer) {
	t.Helper()
	lis, err := net.Listen("unix", sock)
	require.NoError(t, err)
	run := &nsmgrRun{}
	srv := testutil.ServeGRPCOn(t, lis, func(s *grpc.Server) { networkservice.RegisterMonitorConnectionServer(s, run) })
	return run, srv
}

// established is what the chain returns: the connection as the NSMgr
// established it.
type established struct{}

func (established) Request(_ context.Context, r *networkservice.NetworkServiceRequest, _ ...grpc.CallOption) (*networkservice.Connection, error) {
	return r.GetConnection(), nil
}

func (established) Close(context.Context, *networkservice.Connection, ...grpc.CallOption) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

// A restarted NSMgr knows no connection: its "unknown" keeps the data path
// until the connection was established through it again; from the run that
// established it, "unknown" means the far end is gone.
func TestNSMgrRuns(t *testing.T) {
	ctx := context.Background()
	sock := filepath.Join(t.TempDir(), "nsmgr.sock")
	run, srv := serveRun(t, sock)
	nsmgr, err := liveness.Dial("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer nsmgr.Close()
	chain := next.NewNetworkServiceClient(nsmgr.NewClient(), established{})
	check := nsmgr.Check(nil, nil)
	conn := connection(networkservice.State_UP)
	up := map[string]*networkservice.Connection{"m1": connection(networkservice.State_UP)}

	run.know(up)
	_, err = chain.Request(ctx, &networkservice.NetworkServiceRequest{Connection: conn})
	require.NoError(t, err)
	require.True(t, check(ctx, conn), "the NSMgr that established it reports it up")
	run.know(nil)
	require.False(t, check(ctx, conn), "the NSMgr that established it forgot it: the far end is gone")

	srv.Stop()
	require.True(t, check(ctx, conn), "NSMgr away: keep the data path")
	run, srv = serveRun(t, sock)
	require.Eventually(t, func() bool { return check(ctx, conn) && run.asked.Load() > 0 }, time.Minute, 10*time.Millisecond,
		"a restarted NSMgr cannot know it yet: keep the data path")
	asked := run.asked.Load()
	require.True(t, check(ctx, conn), "and again, until the connection is re-requested through it")
	require.Equal(t, asked+1, run.asked.Load(), "the new run answered")

	_, err = chain.Request(ctx, &networkservice.NetworkServiceRequest{Connection: conn})
	require.NoError(t, err)
	require.False(t, check(ctx, conn), "re-established through the new run, which forgot it: the far end is gone")
	run.know(up)
	require.True(t, check(ctx, conn), "the new run reports it up")

	// A re-request served by a third run before the check has asked it
	// anything is recorded with that run, not the previous one.
	srv.Stop()
	run, srv = serveRun(t, sock)
	_, err = chain.Request(ctx, &networkservice.NetworkServiceRequest{Connection: conn})
	require.NoError(t, err)
	require.False(t, check(ctx, conn), "re-established through the third run, which forgot it: the far end is gone")

	failing := next.NewNetworkServiceClient(nsmgr.NewClient(), injecterror.NewClient())
	_, err = failing.Request(ctx, &networkservice.NetworkServiceRequest{Connection: connection(networkservice.State_UP)})
	require.Error(t, err)
	_, err = chain.Close(ctx, conn)
	require.NoError(t, err)
	run.know(nil)
	require.False(t, check(ctx, conn), "a closed connection has no record: unknown is believed")
}
