package endpoint_test

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/client"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/sendfd"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	registryclient "github.com/networkservicemesh/sdk/pkg/registry/chains/client"
	"github.com/networkservicemesh/sdk/pkg/tools/sandbox"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/dataplane/dataplanefake"
	"github.com/causeway-net/causeway/pkg/nsm/chain/connlink"
	"github.com/causeway-net/causeway/pkg/nsm/chain/connlink/linkstest"
	"github.com/causeway-net/causeway/pkg/nsm/chain/ipcontext"
	"github.com/causeway-net/causeway/pkg/nsm/chain/ipcontext/ipcontextfake"
	"github.com/causeway-net/causeway/pkg/nsm/chain/mtu"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
	"github.com/causeway-net/causeway/pkg/nsm/endpoint"
	"github.com/causeway-net/causeway/pkg/nsm/nsmtest"
	"github.com/causeway-net/causeway/pkg/proxy"
)

func TestMain(m *testing.M) {
	nsmtest.Quiet()
	testutil.VerifyTestMain(m)
}

const service = "proxy.conduit-a.trench-a.ns"

// newTargetSetter plays the proxy: each target connection gets a -src
// address (the target's), a -dst address (the proxy side), from host base
// on, and the bridge as gateway.
func newTargetSetter(base int) *ipcontextfake.Setter {
	return &ipcontextfake.Setter{Type: proxy.TargetConn, Subnet: netip.MustParsePrefix("172.16.0.0/24"), First: base,
		Gateways: []string{"172.16.0.1/24"}}
}

// ifnames records the interface name the forwarder will give the proxy's
// side of each connection.
type ifnames struct {
	mu    sync.Mutex
	names []string
}

func (r *ifnames) Request(ctx context.Context, req *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	conn, err := next.Server(ctx).Request(ctx, req)
	if err == nil {
		r.mu.Lock()
		r.names = append(r.names, kernelmech.ToMechanism(conn.GetMechanism()).GetInterfaceName())
		r.mu.Unlock()
	}
	return conn, err
}

func (r *ifnames) Close(ctx context.Context, conn *networkservice.Connection) (*emptypb.Empty, error) {
	return next.Server(ctx).Close(ctx, conn)
}

func (r *ifnames) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.names) == 0 {
		return ""
	}
	return r.names[len(r.names)-1]
}

type proxyUnderTest struct {
	ep      *endpoint.Endpoint
	setter  *ipcontextfake.Setter
	handler *linkstest.Recorder
	monitor *connlink.Matcher
	links   *dataplanefake.Dataplane
	names   *ifnames
}

func startProxy(ctx context.Context, t *testing.T, nsmgrURL *url.URL, name, node string, base int, opts ...endpoint.Option) *proxyUnderTest {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	creds := credentials.Insecure(quiet, time.Hour)
	p := &proxyUnderTest{setter: newTargetSetter(base), handler: &linkstest.Recorder{}, names: &ifnames{}}
	p.links = &dataplanefake.Dataplane{}
	p.monitor = connlink.New(p.handler, p.links, connlink.WithLogger(quiet))
	ep, err := endpoint.Start(ctx, endpoint.Config{
		Name:           name,
		Service:        service,
		NodeName:       node,
		ConnectTo:      nsmgrURL,
		TokenGenerator: creds.TokenGenerator(),
		DialOptions:    creds.NSMDialOptions(),
		ServerOptions:  creds.NSMServerOptions(),
		Elements: []networkservice.NetworkServiceServer{
			nsmtest.KernelServer(),
			ipcontext.NewServer(p.setter, ipcontext.WithLogger(quiet)),
			connlink.NewServer(p.monitor, connlink.WithLogger(quiet)),
			mtu.NewServer(mtu.WithMTU(1450)),
			p.names,
		},
	}, append([]endpoint.Option{
		endpoint.WithAuthorizeServer(creds.AuthorizeServer()),
		endpoint.WithLogger(quiet),
	}, opts...)...)
	require.NoError(t, err)
	p.ep = ep
	return p
}

func TestTargetsReachTheProxyOfTheirNode(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	domain := nsmtest.NewDomain(ctx, t)
	nsmgrURL := domain.Nodes[0].NSMgr.URL

	tcp := endpoint.WithListenURL(&url.URL{Scheme: "tcp", Host: "127.0.0.1:0"})
	proxyA := startProxy(ctx, t, nsmgrURL, "proxy-a", "node-a", 10, tcp)
	proxyB := startProxy(ctx, t, nsmgrURL, "proxy-b", "node-b", 100, tcp)
	require.Equal(t, "node-a", proxyA.ep.Registration().GetNetworkServiceLabels()[service].GetLabels()[endpoint.NodeNameLabel])

	nsc := domain.Nodes[0].NewClient(ctx, sandbox.GenerateTestToken, client.WithAdditionalFunctionality(kernel.NewClient()))
	request := func(id, node string) *networkservice.NetworkServiceRequest {
		return &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{
			Id: id, NetworkService: service, Labels: map[string]string{endpoint.NodeNameLabel: node},
		}}
	}
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()

	connA, err := nsc.Request(rctx, request("target-1", "node-a"))
	require.NoError(t, err)
	require.Equal(t, "proxy-a", connA.GetNetworkServiceEndpointName(), "a target is routed to the proxy of its node")
	ipc := connA.GetContext().GetIpContext()
	require.Equal(t, []string{"172.16.0.10/24"}, ipc.GetSrcIpAddrs())
	require.Equal(t, []string{"172.16.0.11/24"}, ipc.GetDstIpAddrs())
	require.Equal(t, []string{"172.16.0.1/24"}, ipc.GetExtraPrefixes(), "the gateways reach the target")
	require.Equal(t, uint32(1450), connA.GetContext().GetMTU())
	require.Equal(t, kernelmech.MECHANISM, connA.GetMechanism().GetType())

	connB, err := nsc.Request(rctx, request("target-2", "node-b"))
	require.NoError(t, err)
	require.Equal(t, "proxy-b", connB.GetNetworkServiceEndpointName())
	require.Equal(t, []string{"172.16.0.100/24"}, connB.GetContext().GetIpContext().GetSrcIpAddrs())

	// The forwarder creates the proxy-side link after the Request.
	ifname := proxyA.names.last()
	require.NotEmpty(t, ifname)
	proxyA.monitor.HandleLinkEvent(proxyA.links.SetLink(42, ifname))
	events, last := proxyA.handler.Events(), proxyA.handler.Last()
	require.Equal(t, []string{"created 42"}, events)
	require.Equal(t, proxy.TargetConn, last.Type)
	require.Equal(t, connA.GetPath().GetPathSegments()[0].GetId(), last.ConnKey, "the target connection's key")

	// A refresh keeps the addresses and releases nothing.
	refreshed, err := nsc.Request(rctx, &networkservice.NetworkServiceRequest{Connection: connA.Clone()})
	require.NoError(t, err)
	require.Equal(t, ipc.GetSrcIpAddrs(), refreshed.GetContext().GetIpContext().GetSrcIpAddrs())
	require.Equal(t, ipc.GetDstIpAddrs(), refreshed.GetContext().GetIpContext().GetDstIpAddrs())
	sets, unsets := proxyA.setter.Counts()
	require.Equal(t, 2, sets)
	require.Equal(t, 0, unsets)
	events = proxyA.handler.Events()
	require.Equal(t, []string{"created 42"}, events, "an unchanged refresh announces nothing")

	_, err = nsc.Close(rctx, refreshed)
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, u := proxyA.setter.Counts(); return u == 1 }, 20*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		ev := proxyA.handler.Events()
		return len(ev) == 2 && ev[1] == "deleted 42"
	}, 20*time.Second, 20*time.Millisecond)
	_, err = nsc.Close(rctx, connB)
	require.NoError(t, err)

	// Stop unregisters the endpoint.
	require.NoError(t, proxyA.ep.Stop(ctx))
	require.NoError(t, proxyB.ep.Stop(ctx))
	reg := registryclient.NewNetworkServiceEndpointRegistryClient(ctx,
		registryclient.WithClientURL(nsmgrURL), registryclient.WithDialOptions(sandbox.DialOptions()...))
	stream, err := reg.Find(rctx, &registryapi.NetworkServiceEndpointQuery{
		NetworkServiceEndpoint: &registryapi.NetworkServiceEndpoint{NetworkServiceNames: []string{service}},
	})
	require.NoError(t, err)
	require.Empty(t, registryapi.ReadNetworkServiceEndpointList(stream))
}

// TestUnixSocketEndpoint runs the deployment shape: the endpoint on a unix
// socket in a temporary directory, registered with its socket passed as a
// file descriptor (sendfd), the NSMgr on a unix socket too.
func TestUnixSocketEndpoint(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	domain := nsmtest.NewDomain(ctx, t, nsmtest.WithUnixSockets())
	nsmgrURL := domain.Nodes[0].NSMgr.URL
	require.Equal(t, "unix", nsmgrURL.Scheme)

	p := startProxy(ctx, t, nsmgrURL, "proxy-a", "node-a", 10)
	require.Equal(t, "unix", p.ep.URL().Scheme)
	socket := p.ep.URL().Path
	require.FileExists(t, socket)

	nsc := domain.Nodes[0].NewClient(ctx, sandbox.GenerateTestToken,
		client.WithAdditionalFunctionality(kernel.NewClient(), sendfd.NewClient()))
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	conn, err := nsc.Request(rctx, &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{
		Id: "target-1", NetworkService: service, Labels: map[string]string{endpoint.NodeNameLabel: "node-a"},
	}})
	require.NoError(t, err)
	require.Equal(t, "proxy-a", conn.GetNetworkServiceEndpointName())
	require.Equal(t, []string{"172.16.0.10/24"}, conn.GetContext().GetIpContext().GetSrcIpAddrs())

	_, err = nsc.Close(rctx, conn)
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, u := p.setter.Counts(); return u == 1 }, 20*time.Second, 20*time.Millisecond)

	require.NoError(t, p.ep.Stop(ctx))
	require.NoFileExists(t, socket, "stop removes the socket directory")
	require.NoError(t, p.ep.Stop(ctx), "stop is idempotent")
}

// TestSocketPathEndpoint runs the lab's shape: a fixed socket path (its
// directory created, a stale file there replaced), labels of the caller's
// own, and a service without the nodeName match, so that a client of any
// node reaches it.
func TestSocketPathEndpoint(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	domain := nsmtest.NewDomain(ctx, t, nsmtest.WithUnixSockets())
	socket := filepath.Join(t.TempDir(), "nse", "lb.sock")
	require.NoError(t, os.MkdirAll(filepath.Dir(socket), 0o750))
	require.NoError(t, os.WriteFile(socket, nil, 0o600), "a stale socket file")

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	creds := credentials.Insecure(quiet, time.Hour)
	ep, err := endpoint.Start(ctx, endpoint.Config{
		Name:           "lb-a",
		Service:        service,
		Labels:         map[string]string{"app": "lb"},
		ConnectTo:      domain.Nodes[0].NSMgr.URL,
		TokenGenerator: creds.TokenGenerator(),
		DialOptions:    creds.NSMDialOptions(),
		ServerOptions:  creds.NSMServerOptions(),
		Elements:       []networkservice.NetworkServiceServer{nsmtest.KernelServer()},
	}, endpoint.WithAuthorizeServer(creds.AuthorizeServer()), endpoint.WithLogger(quiet),
		endpoint.WithSocketPath(socket), endpoint.WithoutNodeMatch())
	require.NoError(t, err)
	defer func() { require.NoError(t, ep.Stop(ctx)) }()
	require.Equal(t, socket, ep.URL().Path)
	labels := ep.Registration().GetNetworkServiceLabels()[service].GetLabels()
	require.Equal(t, map[string]string{"app": "lb"}, labels, "no nodeName label without a node")

	nsc := domain.Nodes[0].NewClient(ctx, sandbox.GenerateTestToken,
		client.WithAdditionalFunctionality(kernel.NewClient(), sendfd.NewClient()))
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	conn, err := nsc.Request(rctx, &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{
		Id: "proxy-1", NetworkService: service, Labels: map[string]string{endpoint.NodeNameLabel: "node-x"},
	}})
	require.NoError(t, err, "no nodeName match: a client of any node reaches the endpoint")
	require.Equal(t, "lb-a", conn.GetNetworkServiceEndpointName())
	_, err = nsc.Close(rctx, conn)
	require.NoError(t, err)
}
