package liveness_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/api/pkg/api/networkservice/payload"
	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/client"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/authorize"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/heal"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/tools/grpcutils"
	"github.com/networkservicemesh/sdk/pkg/tools/sandbox"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/pkg/nsm/chain/liveness"
	"github.com/causeway-net/causeway/pkg/nsm/nsmtest"
)

// closes counts the Closes that pass through a client chain: a heal that
// reselects closes the connection (its data path) first.
type closes struct{ n atomic.Int32 }

func (c *closes) Request(ctx context.Context, r *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	return next.Client(ctx).Request(ctx, r, opts...)
}

func (c *closes) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	c.n.Add(1)
	return next.Client(ctx).Close(ctx, conn, opts...)
}

// requests counts the Requests an endpoint serves.
type requests struct{ n atomic.Int32 }

func (r *requests) Request(ctx context.Context, req *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	r.n.Add(1)
	return next.Server(ctx).Request(ctx, req)
}

func (r *requests) Close(ctx context.Context, conn *networkservice.Connection) (*emptypb.Empty, error) {
	return next.Server(ctx).Close(ctx, conn)
}

// TestSandboxRemoteNSMgrRestarted: a client on node 0 connected to an
// endpoint on node 1, with the heal check on node 0's NSMgr. Node 1's
// NSMgr restarts: node 0's NSMgr, alive, reports the connection down. When
// the far end answers on the data path, heal re-requests the connection
// as it is, through the new NSMgr, and never closes it; when it does not,
// the NSMgr is believed and heal reselects, closing the connection first
// (before the check took the data path's word, a proxy did so for an LB
// that still answered: NSMReplaced on several nodes).
func TestSandboxRemoteNSMgrRestarted(t *testing.T) {
	nsmtest.Quiet()
	for name, answers := range map[string]bool{"answering": true, "silent": false} {
		t.Run(name, func(t *testing.T) { testRemoteNSMgrRestarted(t, answers) })
	}
}

func testRemoteNSMgrRestarted(t *testing.T, answers bool) {
	before := goleak.IgnoreCurrent()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	domain := sandbox.NewBuilder(ctx, t).
		SetNodesCount(2).
		SetNSMgrProxySupplier(nil).
		SetRegistryProxySupplier(nil).
		Build()
	const service = "lb.trench"
	_, err := domain.NewNSRegistryClient(ctx, sandbox.GenerateTestToken).Register(ctx,
		&registryapi.NetworkService{Name: service, Payload: payload.Ethernet})
	require.NoError(t, err)
	served := &requests{}
	domain.Nodes[1].NewEndpoint(ctx, &registryapi.NetworkServiceEndpoint{Name: "lb-1", NetworkServiceNames: []string{service}},
		sandbox.GenerateTestToken, served)

	nsmgr, err := liveness.Dial(grpcutils.URLToTarget(domain.Nodes[0].NSMgr.URL), sandbox.DialOptions()...)
	require.NoError(t, err)
	defer func() { _ = nsmgr.Close() }()
	closed := &closes{}
	nsc := client.NewClient(ctx,
		client.WithClientURL(sandbox.CloneURL(domain.Nodes[0].NSMgr.URL)),
		client.WithName("proxy"),
		client.WithDialOptions(sandbox.DialOptions()...),
		client.WithDialTimeout(5*time.Second),
		client.WithAuthorizeClient(authorize.NewClient(authorize.Any())),
		client.WithHealClient(heal.NewClient(ctx, nsmgr.HealOptions(nil, func(*networkservice.Connection) bool { return answers })...)),
		client.WithAdditionalFunctionality(nsmgr.NewClient(), closed),
	)
	_, err = nsc.Request(ctx, &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{
		Id: "proxy-lb-1", NetworkService: service, NetworkServiceEndpointName: "lb-1", Payload: payload.Ethernet,
	}})
	require.NoError(t, err)
	require.Equal(t, int32(1), served.n.Load())

	domain.Nodes[1].NSMgr.Restart()
	require.Eventually(t, func() bool { return served.n.Load() > 1 }, 30*time.Second, 10*time.Millisecond,
		"healed through node 1's new NSMgr")
	if answers {
		require.Zero(t, closed.n.Load(), "the far end answers: re-requested as it is, never closed")
	} else {
		require.Positive(t, closed.n.Load(), "the far end is silent: reselected, closed first")
	}
	// The sandbox's and the SDK's heal goroutines end after the context,
	// in their own time (a check in flight asks for up to askTimeout, on a
	// context heal detached from ours): wait for them here, so that the
	// package's leak check at exit does not race them on a busy machine.
	cancel()
	_ = nsmgr.Close()
	require.Eventually(t, func() bool { return goleak.Find(before) == nil }, time.Minute, 100*time.Millisecond,
		"goroutines of the scenario still running a minute after it ended")
}
