package leader

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/testutil"
)

// replicaServer serves a Gate and a health server, as ipamd does.
type replicaServer struct {
	gate *Gate
	hs   *grpchealth.Server
	srv  *testutil.GRPCServer
}

func serveReplica(t *testing.T) *replicaServer {
	r := &replicaServer{gate: &Gate{}, hs: grpchealth.NewServer()}
	r.srv = testutil.ServeGRPC(t, "", func(s *grpc.Server) {
		ipamv1.RegisterIpamServer(s, r.gate)
		healthpb.RegisterHealthServer(s, r.hs)
	})
	return r
}

// runForwarder starts f (stopped at the end of the test) and returns what
// it reported last.
func runForwarder(t *testing.T, f *Forwarder) func() bool {
	var mu sync.Mutex
	last := false
	f.OnReachable = func(ok bool) { mu.Lock(); last = ok; mu.Unlock() }
	f.Creds, f.Period, f.Logger = insecure.NewCredentials(), 20*time.Millisecond, slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return func() bool { mu.Lock(); defer mu.Unlock(); return last }
}

// A standby forwards to the replica the Lease names, which serves; it is
// reachable while the leader says HealthService SERVING; with no other
// leader known it refuses.
func TestForwarderServesThroughTheLeader(t *testing.T) {
	leader := serveReplica(t)
	leader.gate.Open(newEngine(t))
	t.Cleanup(func() { leader.gate.Shut().Close() })
	leader.hs.SetServingStatus(HealthService, healthpb.HealthCheckResponse_SERVING)

	host, port, err := net.SplitHostPort(leader.srv.Addr)
	require.NoError(t, err)
	// The identity is the port, as in the API server tests.
	f := &Forwarder{Self: "standby", Address: net.JoinHostPort(host, IdentityPlaceholder)}
	reachable := runForwarder(t, f)
	standby := &Gate{Standby: f}

	_, err = standby.Allocate(context.Background(), req("a", "c1"))
	require.Equal(t, codes.Unavailable, status.Code(err), "no leader known yet")
	f.SetLeader(port)
	p, err := standby.Allocate(context.Background(), req("a", "c1"))
	require.NoError(t, err)
	assert.Equal(t, "172.16.0.1", p.GetAddress())
	require.Eventually(t, reachable, time.Minute, 10*time.Millisecond)
	_, err = standby.Release(context.Background(), req("a", "c1"))
	require.NoError(t, err)

	leader.hs.SetServingStatus(HealthService, healthpb.HealthCheckResponse_NOT_SERVING)
	require.Eventually(t, func() bool { return !reachable() }, time.Minute, 10*time.Millisecond)
	f.SetLeader("standby")
	_, err = standby.Allocate(context.Background(), req("a", "c1"))
	require.Equal(t, codes.Unavailable, status.Code(err), "the Lease names this replica, which does not serve")
}

// Two standbys that each believe the other leads refuse a call instead of
// passing it back and forth.
func TestForwarderNeverForwardsAForwardedCall(t *testing.T) {
	a, b := serveReplica(t), serveReplica(t)
	fa := &Forwarder{Self: "a", Address: IdentityPlaceholder}
	fb := &Forwarder{Self: "b", Address: IdentityPlaceholder}
	runForwarder(t, fa)
	runForwarder(t, fb)
	a.gate.Standby, b.gate.Standby = fa, fb
	fa.SetLeader(b.srv.Addr)
	fb.SetLeader(a.srv.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := ipamv1.NewIpamClient(a.srv.Dial(t)).Allocate(ctx, req("a", "c1"))
	require.Equal(t, codes.Unavailable, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "does not serve now")
}
