package fullmesh_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/edwarnicke/grpcfd"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/networkservicemesh/api/pkg/api/networkservice/payload"
	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/client"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/endpoint"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/authorize"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/heal"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	registryclient "github.com/networkservicemesh/sdk/pkg/registry/chains/client"
	"github.com/networkservicemesh/sdk/pkg/tools/grpcutils"
	"github.com/networkservicemesh/sdk/pkg/tools/sandbox"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/dataplane/dataplanefake"
	"github.com/causeway-net/causeway/pkg/nsm/chain/connlink"
	"github.com/causeway-net/causeway/pkg/nsm/chain/connlink/linkstest"
	"github.com/causeway-net/causeway/pkg/nsm/chain/egress"
	"github.com/causeway-net/causeway/pkg/nsm/chain/ipcontext"
	"github.com/causeway-net/causeway/pkg/nsm/chain/ipcontext/ipcontextfake"
	"github.com/causeway-net/causeway/pkg/nsm/chain/mtu"
	"github.com/causeway-net/causeway/pkg/nsm/fullmesh"
	"github.com/causeway-net/causeway/pkg/nsm/nsmtest"
	"github.com/causeway-net/causeway/pkg/proxy"
)

const lbService = "conduit-a.trench-a.ns"

// meshBed is a sandbox domain of one node where the LB network service is
// registered.
type meshBed struct {
	node     *sandbox.Node
	nsmgrURL *url.URL
	quiet    *slog.Logger
}

func newMeshBed(ctx context.Context, t *testing.T) *meshBed {
	t.Helper()
	domain := nsmtest.NewDomain(ctx, t)
	node := domain.Nodes[0]
	_, err := domain.NewNSRegistryClient(ctx, sandbox.GenerateTestToken).Register(ctx,
		&registryapi.NetworkService{Name: lbService, Payload: payload.Ethernet})
	require.NoError(t, err)
	return &meshBed{node: node, nsmgrURL: node.NSMgr.URL, quiet: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// addLB serves and registers an LB endpoint of the service.
func (b *meshBed) addLB(ctx context.Context, name string) (*nsmtest.Conns, *sandbox.EndpointEntry, *registryapi.NetworkServiceEndpoint) {
	lb := &nsmtest.Conns{}
	nse := &registryapi.NetworkServiceEndpoint{Name: name, NetworkServiceNames: []string{lbService}}
	return lb, b.node.NewEndpoint(ctx, nse, sandbox.GenerateTestToken, nsmtest.KernelServer(), lb), nse
}

// proxyClient is the proxy's NSM client "proxy-a" with the kernel mechanism
// and then more, healing when heals.
func (b *meshBed) proxyClient(ctx context.Context, heals bool, more ...networkservice.NetworkServiceClient) networkservice.NetworkServiceClient {
	opts := []client.Option{
		client.WithClientURL(sandbox.CloneURL(b.nsmgrURL)),
		client.WithName("proxy-a"),
		client.WithDialOptions(sandbox.DialOptions()...),
		client.WithDialTimeout(5 * time.Second),
		client.WithAuthorizeClient(authorize.NewClient(authorize.Any())),
	}
	if heals {
		opts = append(opts, client.WithHealClient(heal.NewClient(ctx)))
	}
	opts = append(opts, client.WithAdditionalFunctionality(append([]networkservice.NetworkServiceClient{kernel.NewClient()}, more...)...))
	return client.NewClient(ctx, opts...)
}

// registry is a registry client of the node's NSMgr.
func (b *meshBed) registry(ctx context.Context) registryapi.NetworkServiceEndpointRegistryClient {
	return registryclient.NewNetworkServiceEndpointRegistryClient(ctx,
		registryclient.WithClientURL(sandbox.CloneURL(b.nsmgrURL)),
		registryclient.WithDialOptions(sandbox.DialOptions()...))
}

// runMesh runs mesh until stop, which waits for Run and returns its error
// (the same error to every call).
func runMesh(ctx context.Context, mesh *fullmesh.FullMesh) (stop func() error) {
	runCtx, cancel := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- mesh.Run(runCtx) }()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			cancel()
			err = <-runDone
		})
		return err
	}
}

func TestSandboxFullMesh(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bed := newMeshBed(ctx, t)
	quiet := bed.quiet

	lbs := map[string]*nsmtest.Conns{}
	entries := map[string]*sandbox.EndpointEntry{}
	nses := map[string]*registryapi.NetworkServiceEndpoint{}
	for _, name := range []string{"lb-1", "lb-2", "lb-3"} {
		lbs[name], entries[name], nses[name] = bed.addLB(ctx, name)
	}
	// lb-x registers once, for a few seconds, and never refreshes: long
	// enough for a busy machine to connect it before it runs out (3 s
	// were not, once).
	lbs["lb-x"] = &nsmtest.Conns{}
	serveShortLived(ctx, t, bed.nsmgrURL, "lb-x", 15*time.Second, lbs["lb-x"])

	handler := &linkstest.Recorder{}
	links := &dataplanefake.Dataplane{}
	monitor := connlink.New(handler, links, connlink.WithLogger(quiet))
	var egressMu sync.Mutex
	var egressReports []bool
	pinner := fullmesh.NewPinner()
	nsc := bed.proxyClient(ctx, true,
		ipcontext.NewClient(&ipcontextfake.Setter{Type: proxy.LBConn, Subnet: netip.MustParsePrefix("172.16.1.0/24"), First: 10},
			ipcontext.WithLogger(quiet)),
		connlink.NewClient(monitor, connlink.WithLogger(quiet)),
		mtu.NewClient(mtu.WithMTU(1500)),
		egress.NewClient(func(s bool) {
			egressMu.Lock()
			egressReports = append(egressReports, s)
			egressMu.Unlock()
		}),
		pinner,
	)
	// The registry's delete of lb-x gets lost on its way to the mesh.
	mesh := fullmesh.New("proxy-a", lbService, nsc, &lossyRegistry{bed.registry(ctx), "lb-x"},
		fullmesh.WithPinner(pinner),
		fullmesh.WithRequestTimeout(15*time.Second),
		fullmesh.WithRetryInterval(100*time.Millisecond),
		fullmesh.WithExpiry(100*time.Millisecond, 500*time.Millisecond),
		fullmesh.WithLogger(quiet),
	)
	stopMesh := runMesh(ctx, mesh)
	defer func() { _ = stopMesh() }()

	const wait, tick = 30 * time.Second, 20 * time.Millisecond
	require.Eventually(t, func() bool { return len(mesh.Connections()) == 4 }, wait, tick)
	conns := mesh.Connections()
	for nse, conn := range conns {
		require.Equal(t, fullmesh.ConnectionID("proxy-a", lbService, nse), conn.GetId())
		require.Equal(t, nse, conn.GetNetworkServiceEndpointName())
		require.Equal(t, kernelmech.MECHANISM, conn.GetMechanism().GetType())
		require.Len(t, conn.GetContext().GetIpContext().GetDstIpAddrs(), 1, "the LB side got its address")
		require.Equal(t, 1, lbs[nse].Count(), "exactly one connection per LB")
	}
	egressMu.Lock()
	require.Equal(t, []bool{true}, egressReports)
	egressMu.Unlock()

	// The forwarder creates the three links in the proxy's namespace.
	ifname := map[string]string{}
	index := map[string]int{}
	for i, nse := range []string{"lb-1", "lb-2", "lb-3"} {
		ifname[nse] = kernelmech.ToMechanism(conns[nse].GetMechanism()).GetInterfaceName()
		index[nse] = 20 + i
		monitor.HandleLinkEvent(links.SetLink(index[nse], ifname[nse]))
		require.Equal(t, []string{fmt.Sprintf("created %d", index[nse])}, handler.Of(ifname[nse]))
		require.Equal(t, conns[nse].GetId(), handler.Interface(ifname[nse]).ConnKey, "the link is matched to its connection")
	}

	// lb-2 is unregistered: its connection is closed and its interface withdrawn.
	_, err := entries["lb-2"].Unregister(ctx, nses["lb-2"])
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := mesh.Connections()["lb-2"]; return !ok }, wait, tick)
	require.Eventually(t, func() bool { return lbs["lb-2"].Count() == 0 }, wait, tick)
	require.Eventually(t, func() bool { return len(handler.Of(ifname["lb-2"])) == 2 }, wait, tick)
	require.Equal(t, fmt.Sprintf("deleted %d", index["lb-2"]), handler.Of(ifname["lb-2"])[1])
	monitor.HandleLinkEvent(links.DeleteLink(index["lb-2"]))
	require.Len(t, handler.Of(ifname["lb-2"]), 2, "the kernel delete of a closed connection is not announced again")

	// The kernel deletes lb-3's link while its connection lives on.
	monitor.HandleLinkEvent(links.DeleteLink(index["lb-3"]))
	require.Equal(t, []string{fmt.Sprintf("created %d", index["lb-3"]), fmt.Sprintf("deleted %d", index["lb-3"])}, handler.Of(ifname["lb-3"]))

	// lb-x's registration runs out without a refresh and the mesh hears of
	// no delete: it evicts lb-x on its own.
	require.Eventually(t, func() bool { _, ok := mesh.Connections()["lb-x"]; return !ok }, wait, tick)
	require.Eventually(t, func() bool { return lbs["lb-x"].Count() == 0 }, wait, tick)
	require.Len(t, mesh.Connections(), 2, "lb-1 and lb-3 are kept")
	require.Equal(t, 1, lbs["lb-1"].Count())

	// Stopping the mesh closes what is left.
	require.NoError(t, stopMesh())
	require.Equal(t, 0, lbs["lb-1"].Count())
	require.Equal(t, 0, lbs["lb-3"].Count())
	egressMu.Lock()
	require.Equal(t, []bool{true, false}, egressReports)
	egressMu.Unlock()
	_, pinned := pinner.Pinned(fullmesh.ConnectionID("proxy-a", lbService, "lb-3"))
	require.False(t, pinned)
}

// serveShortLived serves an LB endpoint and registers it once, with a short
// lifetime, through a bare registry client (no refresh): the registry lets
// the registration expire.
func serveShortLived(ctx context.Context, t *testing.T, nsmgrURL *url.URL, name string, lifetime time.Duration, elem networkservice.NetworkServiceServer) {
	t.Helper()
	nse := endpoint.NewServer(ctx, sandbox.GenerateTestToken, endpoint.WithName(name),
		endpoint.WithAdditionalFunctionality(nsmtest.KernelServer(), elem))
	srv := testutil.ServeGRPC(t, "", nse.Register, grpc.Creds(grpcfd.TransportCredentials(insecure.NewCredentials())))

	cc, err := grpc.NewClient(grpcutils.URLToTarget(nsmgrURL), sandbox.DialOptions()...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	_, err = registryapi.NewNetworkServiceEndpointRegistryClient(cc).Register(ctx, &registryapi.NetworkServiceEndpoint{
		Name:                name,
		NetworkServiceNames: []string{lbService},
		Url:                 "tcp://" + srv.Addr,
		ExpirationTime:      timestamppb.New(time.Now().Add(lifetime)),
	})
	require.NoError(t, err)
}

// lossyRegistry drops the delete events of one endpoint.
type lossyRegistry struct {
	registryapi.NetworkServiceEndpointRegistryClient
	drop string
}

func (r *lossyRegistry) Find(ctx context.Context, q *registryapi.NetworkServiceEndpointQuery, opts ...grpc.CallOption) (registryapi.NetworkServiceEndpointRegistry_FindClient, error) {
	s, err := r.NetworkServiceEndpointRegistryClient.Find(ctx, q, opts...)
	if err != nil {
		return nil, err
	}
	return &lossyStream{s, r.drop}, nil
}

type lossyStream struct {
	registryapi.NetworkServiceEndpointRegistry_FindClient
	drop string
}

func (s *lossyStream) Recv() (*registryapi.NetworkServiceEndpointResponse, error) {
	for {
		resp, err := s.NetworkServiceEndpointRegistry_FindClient.Recv()
		if err != nil || !resp.GetDeleted() || resp.GetNetworkServiceEndpoint().GetName() != s.drop {
			return resp, err
		}
	}
}

// TestSandboxRecoveryAfterRestart: a proxy that crashed left its connection
// to lb-1 in the NSMgr; the next run finds it through the connection
// monitor and reselects it, so the LB ends up with one connection from the
// proxy, not a stale one beside a new one.
func TestSandboxRecoveryAfterRestart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bed := newMeshBed(ctx, t)
	lb1, _, _ := bed.addLB(ctx, "lb-1")
	id := fullmesh.ConnectionID("proxy-a", lbService, "lb-1")

	// The previous run: connected, then gone without a Close.
	firstCtx, crash := context.WithCancel(ctx)
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	_, err := bed.proxyClient(firstCtx, false).Request(rctx, &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{
		Id: id, NetworkService: lbService, NetworkServiceEndpointName: "lb-1",
	}})
	require.NoError(t, err)
	crash()
	require.Equal(t, 1, lb1.Count())

	cc, err := grpc.NewClient(grpcutils.URLToTarget(bed.nsmgrURL), sandbox.DialOptions()...)
	require.NoError(t, err)
	defer func() { _ = cc.Close() }()
	mesh := fullmesh.New("proxy-a", lbService, bed.proxyClient(ctx, false), bed.registry(ctx),
		fullmesh.WithRecovery(networkservice.NewMonitorConnectionClient(cc)),
		fullmesh.WithRetryInterval(100*time.Millisecond),
		fullmesh.WithLogger(bed.quiet),
	)
	stopMesh := runMesh(ctx, mesh)

	require.Eventually(t, func() bool { return len(mesh.Connections()) == 1 }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, lb1.Count(), "the leftover connection was replaced, not duplicated")

	require.NoError(t, stopMesh())
	require.Equal(t, 0, lb1.Count())
}

// TestSandboxWatchSurvivesNSMgrRestart: the NSMgr restarts under the
// mesh; the watch comes back and new endpoints are still joined.
func TestSandboxWatchSurvivesNSMgrRestart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bed := newMeshBed(ctx, t)
	bed.addLB(ctx, "lb-1")

	mesh := fullmesh.New("proxy-a", lbService, bed.proxyClient(ctx, true), bed.registry(ctx),
		fullmesh.WithRetryInterval(100*time.Millisecond),
		fullmesh.WithWatchBackoff(50*time.Millisecond, 500*time.Millisecond),
		fullmesh.WithLogger(bed.quiet),
	)
	stopMesh := runMesh(ctx, mesh)
	defer func() { _ = stopMesh() }()
	const wait, tick = 30 * time.Second, 20 * time.Millisecond
	require.Eventually(t, func() bool { return len(mesh.Connections()) == 1 }, wait, tick)

	bed.node.NSMgr.Restart()
	bed.addLB(ctx, "lb-2")
	require.Eventually(t, func() bool {
		conns := mesh.Connections()
		return len(conns) == 2 && conns["lb-2"] != nil
	}, wait, tick)
	// What the LBs see across an NSMgr restart is up to NSM's heal; the
	// mesh's part is that its watch came back.
}
