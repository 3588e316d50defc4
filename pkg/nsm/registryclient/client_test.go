package registryclient_test

import (
	"context"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/registry/common/memory"
	"github.com/networkservicemesh/sdk/pkg/registry/core/chain"
	"github.com/networkservicemesh/sdk/pkg/registry/core/next"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/registryclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// registers counts the Registers that reach the registry and grants each
// a second, as an NSMgr's registry grants its expiration.
type registers struct{ n atomic.Int32 }

func (r *registers) Register(ctx context.Context, nse *registry.NetworkServiceEndpoint) (*registry.NetworkServiceEndpoint, error) {
	r.n.Add(1)
	nse.ExpirationTime = timestamppb.New(time.Now().Add(time.Second))
	return next.NetworkServiceEndpointRegistryServer(ctx).Register(ctx, nse)
}

func (r *registers) Find(q *registry.NetworkServiceEndpointQuery, s registry.NetworkServiceEndpointRegistry_FindServer) error {
	return next.NetworkServiceEndpointRegistryServer(s.Context()).Find(q, s)
}

func (r *registers) Unregister(ctx context.Context, nse *registry.NetworkServiceEndpoint) (*empty.Empty, error) {
	return next.NetworkServiceEndpointRegistryServer(ctx).Unregister(ctx, nse)
}

// serveRegistry serves an in-memory registry over gRPC and returns its URL.
func serveRegistry(t *testing.T, r *registers) *url.URL {
	nses := chain.NewNetworkServiceEndpointRegistryServer(r, memory.NewNetworkServiceEndpointRegistryServer())
	nss := memory.NewNetworkServiceRegistryServer()
	s := testutil.ServeGRPC(t, "", func(s *grpc.Server) {
		registry.RegisterNetworkServiceEndpointRegistryServer(s, nses)
		registry.RegisterNetworkServiceRegistryServer(s, nss)
	})
	return &url.URL{Scheme: "tcp", Host: s.Addr}
}

var dial = registryclient.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()))

// TestClientsRegisterRefreshFindAndUnregister: the chains reach the
// registry, the endpoint client refreshes its registration before it
// expires, and the extra elements are in the endpoint chain.
func TestClientsRegisterRefreshFindAndUnregister(t *testing.T) {
	var r registers
	u := serveRegistry(t, &r)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var extra registers
	ns := registryclient.NewNSClient(ctx, u, dial)
	nse := registryclient.NewNSEClient(ctx, u, dial, registryclient.WithEndpointElements(
		chain.NewNetworkServiceEndpointRegistryClient(countingClient{&extra})))

	_, err := ns.Register(ctx, &registry.NetworkService{Name: "svc"})
	require.NoError(t, err)
	reg, err := nse.Register(ctx, &registry.NetworkServiceEndpoint{Name: "nse-1", NetworkServiceNames: []string{"svc"}})
	require.NoError(t, err)
	require.Equal(t, "nse-1", reg.GetName())
	require.Eventually(t, func() bool { return r.n.Load() >= 3 }, time.Minute, 20*time.Millisecond, "refreshed before expiry")
	require.GreaterOrEqual(t, extra.n.Load(), int32(3), "the extra element sees each Register")

	require.Len(t, findNSE(ctx, t, nse), 1)
	stream, err := ns.Find(ctx, &registry.NetworkServiceQuery{NetworkService: &registry.NetworkService{Name: "svc"}})
	require.NoError(t, err)
	require.Len(t, registry.ReadNetworkServiceList(stream), 1)

	_, err = nse.Unregister(ctx, reg)
	require.NoError(t, err)
	require.Empty(t, findNSE(ctx, t, nse))
	n := r.n.Load()
	time.Sleep(1500 * time.Millisecond)
	require.Equal(t, n, r.n.Load(), "no refresh after Unregister")
}

func findNSE(ctx context.Context, t *testing.T, c registry.NetworkServiceEndpointRegistryClient) []*registry.NetworkServiceEndpoint {
	t.Helper()
	stream, err := c.Find(ctx, &registry.NetworkServiceEndpointQuery{NetworkServiceEndpoint: &registry.NetworkServiceEndpoint{Name: "nse-1"}})
	require.NoError(t, err)
	return registry.ReadNetworkServiceEndpointList(stream)
}

// TestWithoutRetryAFailureReturns: without WithRetry, a Register to a
// registry that is not there fails (the caller retries).
func TestWithoutRetryAFailureReturns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nse := registryclient.NewNSEClient(ctx, &url.URL{Scheme: "unix", Path: t.TempDir() + "/none.sock"}, dial,
		registryclient.WithDialTimeout(100*time.Millisecond))
	_, err := nse.Register(ctx, &registry.NetworkServiceEndpoint{Name: "nse-1"})
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "it returned before the caller's deadline")
}

// countingClient counts the Registers that pass it.
type countingClient struct{ r *registers }

func (c countingClient) Register(ctx context.Context, nse *registry.NetworkServiceEndpoint, opts ...grpc.CallOption) (*registry.NetworkServiceEndpoint, error) {
	c.r.n.Add(1)
	return next.NetworkServiceEndpointRegistryClient(ctx).Register(ctx, nse, opts...)
}

func (c countingClient) Find(ctx context.Context, q *registry.NetworkServiceEndpointQuery, opts ...grpc.CallOption) (registry.NetworkServiceEndpointRegistry_FindClient, error) {
	return next.NetworkServiceEndpointRegistryClient(ctx).Find(ctx, q, opts...)
}

func (c countingClient) Unregister(ctx context.Context, nse *registry.NetworkServiceEndpoint, opts ...grpc.CallOption) (*empty.Empty, error) {
	return next.NetworkServiceEndpointRegistryClient(ctx).Unregister(ctx, nse, opts...)
}
