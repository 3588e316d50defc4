package proxyd_test

import (
	"context"
	"fmt"
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
	"github.com/networkservicemesh/api/pkg/api/networkservice/payload"
	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/client"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	registryclient "github.com/networkservicemesh/sdk/pkg/registry/chains/client"
	"github.com/networkservicemesh/sdk/pkg/tools/sandbox"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/dataplane/dataplanefake"
	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
	"github.com/causeway-net/causeway/pkg/nsm/endpoint"
	"github.com/causeway-net/causeway/pkg/nsm/nsmtest"
	"github.com/causeway-net/causeway/pkg/nspd/configfile"
	"github.com/causeway-net/causeway/pkg/nspd/nspserver"
	"github.com/causeway-net/causeway/pkg/proxyd"
)

func TestMain(m *testing.M) {
	nsmtest.Quiet()
	testutil.VerifyTestMain(m)
}

const (
	trench    = "trench-a"
	conduit   = "conduit-a"
	node      = "node-a"
	proxyName = "proxy-a"
	service   = "proxy." + conduit + "." + trench + ".ns"
	lbService = conduit + "." + trench + ".ns"

	wait = 30 * time.Second
	tick = 20 * time.Millisecond
)

func quietLogger() *slog.Logger {
	if os.Getenv("CAUSEWAY_NSM_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// fakeDataplane stands in for the kernel: it records the applied states
// and plays the link table for the links the test (or the sandbox
// forwarder, through kernel) creates and deletes.
type fakeDataplane = dataplanefake.Dataplane

func newFakeDataplane() *fakeDataplane { return &dataplanefake.Dataplane{} }

// lastState is the last state dp applied (the zero State before any).
func lastState(dp *fakeDataplane) dataplane.State {
	s, _ := dp.Last()
	return s
}

// fakeKernel routes the forwarder's link changes to the fake dataplane of the
// running proxy: the proxy's side of a target connection (proxy is the
// endpoint) and of an LB connection (proxy is the client).
type fakeKernel struct {
	mu sync.Mutex
	dp *fakeDataplane
}

func (k *fakeKernel) set(dp *fakeDataplane) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dp = dp
}

func (k *fakeKernel) observe(ch nsmtest.LinkChange) {
	k.mu.Lock()
	dp := k.dp
	k.mu.Unlock()
	if dp == nil {
		return
	}
	var name string
	switch proxyName {
	case ch.Endpoint:
		name = ch.EndpointIfName
	case ch.Client:
		name = ch.ClientIfName
	default:
		return
	}
	if ch.Deleted {
		dp.DelLink(name)
	} else {
		dp.AddLink(name)
	}
}

// env is one node: the NSM sandbox, the real IPAM engine on a memory store
// and the NSP configuration server, both served over loopback gRPC.
type env struct {
	ctx    context.Context
	domain *sandbox.Domain
	engine *ipam.Engine
	nsp    *nspserver.Server
	kernel *fakeKernel
	ipam   string
	nspURL string
	dir    string
	// connectTo is the NSMgr's URL (the domain's).
	connectTo url.URL
}

func newEnv(t *testing.T, opts ...nsmtest.Option) *env {
	t.Helper()
	e := newServices(t, 24)
	e.domain = nsmtest.NewDomain(e.ctx, t, append(opts, nsmtest.WithLinkObserver(e.kernel.observe))...)
	e.connectTo = *sandbox.CloneURL(e.domain.Nodes[0].NSMgr.URL)
	// Registered through the NSMgr, which keeps the registry itself when
	// the domain runs on unix sockets.
	nsReg := registryclient.NewNetworkServiceRegistryClient(e.ctx,
		registryclient.WithClientURL(sandbox.CloneURL(e.domain.Nodes[0].NSMgr.URL)),
		registryclient.WithDialOptions(sandbox.DialOptions()...))
	_, err := nsReg.Register(e.ctx, &registryapi.NetworkService{Name: lbService, Payload: payload.Ethernet})
	require.NoError(t, err)
	return e
}

// newServices is a node without its NSM domain: the IPAM engine (IPv4
// node subnets of nodeLength4 bits) and the NSP server.
func newServices(tb testing.TB, nodeLength4 int) *env {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	e := &env{ctx: ctx, kernel: &fakeKernel{}, dir: tb.TempDir()}

	engine, err := ipam.New(ctx, memory.New(), ipam.Config{
		Trench: trench,
		IPv4:   &ipam.FamilyConfig{Pool: netip.MustParsePrefix("172.16.0.0/16"), ConduitLength: min(20, nodeLength4-2), NodeLength: nodeLength4},
		IPv6:   &ipam.FamilyConfig{Pool: netip.MustParsePrefix("fd00::/48"), ConduitLength: 56, NodeLength: 64},
		Logger: quietLogger(),
	})
	require.NoError(tb, err)
	tb.Cleanup(engine.Close)
	e.engine = engine
	e.ipam = serveGRPC(tb, func(s *grpc.Server) { ipamv1.RegisterIpamServer(s, ipam.NewServer(engine)) }, nil)

	e.nsp = nspserver.New(quietLogger())
	e.nsp.SetConfig(&configfile.Config{
		Trenches: []configfile.Trench{{Name: trench}},
		Conduits: []configfile.Conduit{{Name: conduit, Trench: trench}},
		VIPs: []configfile.VIP{
			{Name: "vip-v4", Address: "20.0.0.1/32", Trench: trench},
			{Name: "vip-v6", Address: "2001:db8::1/128", Trench: trench},
		},
	})
	e.nspURL = serveGRPC(tb, func(s *grpc.Server) { nspv1.RegisterConfigurationManagerServer(s, e.nsp) }, e.nsp.Close)
	return e
}

// serveGRPC serves on 127.0.0.1:0 until the test ends and returns the
// address. beforeStop runs first at cleanup (ends watch streams).
func serveGRPC(t testing.TB, register func(*grpc.Server), beforeStop func()) string {
	t.Helper()
	s := testutil.ServeGRPC(t, "", register)
	if beforeStop != nil {
		t.Cleanup(beforeStop)
	}
	return s.Addr
}

// config is the proxy's configuration for this node, as the NSM_*
// environment would give it.
func (e *env) config(t testing.TB, releaseDelay time.Duration) *proxyd.Config {
	t.Helper()
	cfg, err := proxyd.Load()
	require.NoError(t, err)
	cfg.Name = proxyName
	cfg.ServiceName = service
	cfg.NetworkServiceName = lbService
	cfg.ConnectTo = e.connectTo
	cfg.Host = node
	cfg.Trench = trench
	cfg.Conduit = conduit
	cfg.Namespace = "ns"
	cfg.IPAMService = e.ipam
	cfg.NSPService = e.nspURL
	cfg.IPFamily = "dualstack"
	cfg.IPReleaseDelay = releaseDelay
	cfg.MaxTokenLifetime = time.Hour
	cfg.Insecure = true
	cfg.ListenOn = "tcp://127.0.0.1:0"
	cfg.HealthSocket = filepath.Join(e.dir, "health.sock")
	cfg.DebugSocket = filepath.Join(e.dir, "debug.sock")
	cfg.MetricsAddress = "127.0.0.1:0"
	require.NoError(t, cfg.Validate())
	return cfg
}

// start starts a daemon on a new fake dataplane and stops it at the end of
// the test.
func (e *env) start(t testing.TB, cfg *proxyd.Config, opts ...proxyd.Option) (*proxyd.Daemon, *fakeDataplane) {
	t.Helper()
	dp := newFakeDataplane()
	e.kernel.set(dp)
	sctx, cancel := context.WithTimeout(e.ctx, wait)
	defer cancel()
	opts = append([]proxyd.Option{proxyd.WithDataplane(dp), proxyd.WithoutSDKLogger()}, opts...)
	d, err := proxyd.Start(sctx, cfg, quietLogger(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Stop() })
	return d, dp
}

// targetClient is a target's NSM client on the node: the kernel mechanism,
// then more.
func (e *env) targetClient(more ...networkservice.NetworkServiceClient) networkservice.NetworkServiceClient {
	return e.domain.Nodes[0].NewClient(e.ctx, sandbox.GenerateTestToken,
		client.WithAdditionalFunctionality(append([]networkservice.NetworkServiceClient{kernel.NewClient()}, more...)...))
}

// addLB serves and registers a load balancer endpoint.
func (e *env) addLB(name string) (*nsmtest.Conns, *sandbox.EndpointEntry, *registryapi.NetworkServiceEndpoint) {
	l := &nsmtest.Conns{}
	nse := &registryapi.NetworkServiceEndpoint{Name: name, NetworkServiceNames: []string{lbService}}
	entry := e.domain.Nodes[0].NewEndpoint(e.ctx, nse, sandbox.GenerateTestToken, nsmtest.KernelServer(), l)
	return l, entry, nse
}

// nodeSubnets are the proxy node's subnets, as the bridge addresses say.
func nodeSubnets(bridge []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(bridge))
	for _, b := range bridge {
		out = append(out, b.Masked())
	}
	return out
}

// mustPrefixes parses CIDR strings.
func mustPrefixes(t *testing.T, ss []string) []netip.Prefix {
	t.Helper()
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		p, err := netip.ParsePrefix(s)
		require.NoError(t, err, s)
		out = append(out, p)
	}
	return out
}

// inSubnets says whether each address is in one of the subnets, one per
// subnet.
func requireOnePerSubnet(t *testing.T, addrs []netip.Prefix, subnets []netip.Prefix) {
	t.Helper()
	require.Len(t, addrs, len(subnets), "one address per family: %v", addrs)
	for i, s := range subnets {
		require.True(t, s.Contains(addrs[i].Addr()) && addrs[i].Bits() == s.Bits(),
			"address %v is not in node subnet %v", addrs[i], s)
	}
}

func targetRequest(id string, conn *networkservice.Connection) *networkservice.NetworkServiceRequest {
	if conn != nil {
		return &networkservice.NetworkServiceRequest{Connection: conn.Clone()}
	}
	return &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{
		Id: id, NetworkService: service, Labels: map[string]string{endpoint.NodeNameLabel: node},
	}}
}

func sprint(v any) string { return fmt.Sprint(v) }

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// ipamProbe allocates a throw-away child of the proxy node's subnet of
// family f in the real engine: it gets the lowest free address.
func (e *env) ipamProbe(t *testing.T, f ipam.Family, name string) netip.Prefix {
	t.Helper()
	p, err := e.engine.Allocate(e.ctx, ipam.Subnet{Trench: trench, Conduit: conduit, Node: node, Family: f}, name)
	require.NoError(t, err)
	return p
}
