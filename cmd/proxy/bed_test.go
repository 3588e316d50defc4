package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
	"github.com/causeway-net/causeway/pkg/proxyd"
)

// Names of the trench under test.
const (
	trench    = "trench-a"
	conduit   = "load-balancer"
	namespace = "default"
	node      = "node-a"
	table     = 1
	bridge    = "bridge0"

	lbService    = conduit + "." + trench + "." + namespace
	proxyService = "proxy." + lbService
)

// bedConfig describes a test bed.
type bedConfig struct {
	// ipFamily is NSM_IP_FAMILY and IPAM_IP_FAMILY.
	ipFamily string
	// lbs is how many LB endpoints to start.
	lbs int
	// logLevel of the proxy (default DEBUG).
	logLevel string
	// ipamEnv is added to the IPAM's environment.
	ipamEnv []string
	// nseExpiration is the NSMgr's registration lifetime (default the control plane's).
	nseExpiration time.Duration
	// proxyEnv is added to the proxy's environment.
	proxyEnv []string
}

// bed is the proxy binary in its namespace with its IPAM (in the same
// namespace, on loopback), an in-process NSM control plane with the veth
// forwarder, and LB endpoints each in its own namespace.
type bed struct {
	t        testing.TB
	ctx      context.Context
	dir      string
	proxyNS  *testutil.NetNS
	ipam     *process
	ipamAddr string
	ipamCC   *grpc.ClientConn
	cp       *controlplane.ControlPlane
	proxy    *process
	lbs      []*lb
	vipFile  string
	proxyBin string
	proxyEnv []string
}

// lb is an LB endpoint: a plain kernel-mechanism NSE that accepts the
// addresses the proxy puts in its requests.
type lb struct {
	name string
	ns   *testutil.NetNS
	ep   *controlplane.Endpoint
}

func startBed(t testing.TB, cfg bedConfig) *bed {
	t.Helper()
	testutil.RequireRoot(t)
	if cfg.logLevel == "" {
		cfg.logLevel = "DEBUG"
	}
	bins := testutil.BuildBinaries(t, "./cmd/proxy", "./cmd/ipam")
	proxyBin, ipamBin := bins["proxy"], bins["ipam"]
	b := &bed{t: t, dir: t.TempDir()}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	b.ctx = ctx
	b.proxyNS = testutil.NewNetNS(t, "proxy")

	// The IPAM runs in the proxy's namespace: the proxy reaches it on
	// loopback, the test through a socket opened in that namespace.
	b.ipam = startProcess(t, "ipam", b.proxyNS, ipamBin, append([]string{
		"IPAM_PORT=0", "IPAM_LISTEN_ADDRESS=127.0.0.1", "IPAM_NSP_SERVICE=", "IPAM_METRICS_PORT=0", "IPAM_INSECURE=true",
		"IPAM_DATASOURCE=" + filepath.Join(b.dir, "ipam.db"), "IPAM_TRENCH_NAME=" + trench,
		"IPAM_IP_FAMILY=" + cfg.ipFamily, "IPAM_LOG_LEVEL=INFO",
	}, cfg.ipamEnv...)...)
	b.ipamAddr, _ = b.ipam.waitLog(t, "serving")["address"].(string)
	require.NotEmpty(t, b.ipamAddr)
	var err error
	b.ipamCC, err = grpc.NewClient("passthrough:///"+b.ipamAddr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialIn(b.proxyNS)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.ipamCC.Close() })

	b.cp, err = controlplane.Start(ctx, controlplane.Config{Dir: b.dir, Name: "e2e", NSEExpiration: cfg.nseExpiration})
	require.NoError(t, err)
	t.Cleanup(b.cp.Stop)

	for i := range cfg.lbs {
		b.lbs = append(b.lbs, b.startLB(fmt.Sprintf("lb-%d", i)))
	}

	vips, err := os.ReadFile(filepath.Join("testdata", "vips.yaml"))
	require.NoError(t, err)
	b.vipFile = filepath.Join(b.dir, "vips.yaml")
	require.NoError(t, os.WriteFile(b.vipFile, vips, 0o644))

	b.proxyBin = proxyBin
	b.proxyEnv = []string{
		"NSM_INSECURE=true",
		"NSM_CONNECT_TO=" + b.cp.NSMgrURL.String(),
		"NSM_IPAM_SERVICE=" + b.ipamAddr,
		"NSM_VIP_FILE=" + b.vipFile,
		"NSM_NAME=proxy-a",
		"NSM_HOST=" + node,
		"NSM_SERVICE_NAME=" + proxyService,
		"NSM_NETWORK_SERVICE_NAME=" + lbService,
		"NSM_TRENCH=" + trench,
		"NSM_CONDUIT=" + conduit,
		"NSM_NAMESPACE=" + namespace,
		"NSM_IP_FAMILY=" + cfg.ipFamily,
		"NSM_HEALTH_SOCKET=" + filepath.Join(b.dir, "health.sock"),
		"NSM_DEBUG_SOCKET=" + filepath.Join(b.dir, "debug.sock"),
		"NSM_LISTEN_ON=" + filepath.Join(b.dir, "proxy.sock"),
		"NSM_BRIDGE_MAC_FILE=" + filepath.Join(b.dir, "bridge.mac"),
		"NSM_METRICS_ADDRESS=",
		"NSM_LOG_LEVEL=" + cfg.logLevel,
		// Released addresses go back to the IPAM at once.
		"NSM_IP_RELEASE_DELAY=0s",
	}
	b.proxyEnv = append(b.proxyEnv, cfg.proxyEnv...)
	b.startProxy("proxy")
	return b
}

// startProxy runs the proxy binary in its namespace and waits until its
// endpoint is registered (targets can connect from then on).
func (b *bed) startProxy(name string) {
	b.t.Helper()
	b.proxy = startProcess(b.t, name, b.proxyNS, b.proxyBin, b.proxyEnv...)
	b.proxy.waitLog(b.t, "endpoint serving and registered")
}

// dialIn returns a gRPC dialer whose sockets are opened in ns.
func dialIn(ns *testutil.NetNS) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		var c net.Conn
		err := ns.Do(func() error {
			var d net.Dialer
			var err error
			c, err = d.DialContext(ctx, "tcp", addr)
			return err
		})
		return c, err
	}
}

// startLB starts an LB endpoint in a new namespace; it is stopped at the
// end of the test.
func (b *bed) startLB(name string) *lb {
	t := b.t
	t.Helper()
	l := &lb{name: name, ns: testutil.NewNetNS(t, "lb")}
	var err error
	l.ep, err = controlplane.StartEndpoint(b.ctx, controlplane.EndpointConfig{
		Name:       name,
		Service:    lbService,
		NSMgrURL:   b.cp.NSMgrURL,
		SocketPath: filepath.Join(b.dir, name+".sock"),
		NetNSPath:  l.ns.Path(),
	})
	require.NoError(t, err)
	t.Cleanup(l.ep.Stop)
	return l
}

// bridgeAddrs asks the IPAM for the proxy's bridge addresses (Allocate is
// idempotent), one per family served.
func (b *bed) bridgeAddrs(families ...ipamv1.IPFamily) []netip.Prefix {
	var out []netip.Prefix
	for _, f := range families {
		out = append(out, b.allocate("bridge", f))
	}
	return out
}

// allocate allocates (or reads: Allocate is idempotent) the child name of
// the proxy's node subnet of family f.
func (b *bed) allocate(name string, f ipamv1.IPFamily) netip.Prefix {
	t := b.t
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	p, err := ipamv1.NewIpamClient(b.ipamCC).Allocate(ctx, &ipamv1.Child{Name: name, Subnet: &ipamv1.Subnet{
		Conduit: &nspv1.Conduit{Name: conduit, Trench: &nspv1.Trench{Name: trench}},
		Node:    node, IpFamily: f,
	}})
	require.NoError(t, err)
	return netip.MustParsePrefix(fmt.Sprintf("%s/%d", p.GetAddress(), p.GetPrefixLength()))
}

// debugState runs `proxy -debug` against the running proxy and decodes
// what it prints.
func (b *bed) debugState() proxyd.DebugState {
	t := b.t
	t.Helper()
	cmd := exec.Command(b.proxyBin, "-debug")
	cmd.Env = []string{"NSM_DEBUG_SOCKET=" + filepath.Join(b.dir, "debug.sock")}
	out, err := cmd.Output()
	require.NoError(t, err, "proxy -debug")
	var st proxyd.DebugState
	require.NoError(t, json.Unmarshal(out, &st), "proxy -debug printed %s", out)
	return st
}

// serving asks the proxy's health socket whether the probe service (e.g.
// "Readiness") is serving.
func (b *bed) serving(service string) bool {
	t := b.t
	t.Helper()
	cc, err := grpc.NewClient("unix://"+filepath.Join(b.dir, "health.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
}

// target is an NSM client of the proxy's service in a target namespace.
type target struct {
	ns     *testutil.NetNS
	ifName string
	conn   *networkservice.Connection
	close  func(t testing.TB) // closes the connection once
}

// connectTarget requests the proxy's service from ns with the interface
// ifName, labelled with the node as a target is; the connection is closed at the end of the test.
func (b *bed) connectTarget(ns *testutil.NetNS, name, ifName string) *target {
	t := b.t
	t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	nsc := controlplane.NewClient(ctx, controlplane.ClientConfig{
		Name: name, NSMgrURL: b.cp.NSMgrURL, InterfaceName: ifName, NetNSPath: ns.Path(),
	})
	reqCtx, reqCancel := context.WithTimeout(ctx, 90*time.Second)
	conn, err := nsc.Request(reqCtx, &networkservice.NetworkServiceRequest{
		Connection: &networkservice.Connection{Id: name + "-conn", NetworkService: proxyService,
			// The proxy's service routes a target to the proxy of its node.
			Labels: map[string]string{"nodeName": node}},
	})
	reqCancel()
	if err != nil {
		cancel()
		require.NoError(t, err, "target %s request", name)
	}
	var once sync.Once
	closeConn := func() (err error) {
		once.Do(func() {
			defer cancel()
			closeCtx, closeCancel := context.WithTimeout(b.ctx, 30*time.Second)
			defer closeCancel()
			_, err = nsc.Close(closeCtx, conn)
		})
		return err
	}
	t.Cleanup(func() { _ = closeConn() })
	return &target{ns: ns, ifName: ifName, conn: conn, close: func(t testing.TB) {
		t.Helper()
		require.NoError(t, closeConn(), "close target %s", name)
	}}
}
