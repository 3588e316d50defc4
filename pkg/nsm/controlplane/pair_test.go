package controlplane_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
)

// pairNode is one node's real control plane (the SDK's NSMgr and the
// project's forwarder) with an endpoint "nse-1" serving "svc" in an NSE
// namespace and a client ("nsc-1", interface nsm0) for an NSC namespace.
// A test may stop the control plane or an endpoint and start one again
// (startControlPlane, startEndpoint); stopClient ends the client's chain
// early. Everything stops when the test ends: the client, the endpoints,
// the control planes.
type pairNode struct {
	ctx        context.Context
	dir        string
	cfg        pairConfig
	cp         *controlplane.ControlPlane
	nse        *controlplane.Endpoint
	nsc        networkservice.NetworkServiceClient
	stopClient context.CancelFunc

	cancel    context.CancelFunc
	cps       []*controlplane.ControlPlane
	endpoints []*controlplane.Endpoint
}

// pairConfig is what startPair starts: the control plane's configuration
// and the client's elements.
type pairConfig struct {
	cp             controlplane.Config
	clientElements []networkservice.NetworkServiceClient
}

// pairOption changes the pair's configuration.
type pairOption func(*pairConfig)

// withNSEExpiration sets the lifetime of the control plane's registrations.
func withNSEExpiration(d time.Duration) pairOption {
	return func(c *pairConfig) { c.cp.NSEExpiration = d }
}

// withClientElements puts elements in the client's chain (ahead of its
// kernel mechanism).
func withClientElements(e ...networkservice.NetworkServiceClient) pairOption {
	return func(c *pairConfig) { c.clientElements = e }
}

// startPair starts the pair of nscNS and nseNS, all of it bounded by life.
func startPair(t *testing.T, nscNS, nseNS *testutil.NetNS, life time.Duration, opts ...pairOption) *pairNode {
	t.Helper()
	n := &pairNode{dir: t.TempDir()}
	n.cfg.cp = controlplane.Config{Dir: n.dir, Name: "t"}
	for _, o := range opts {
		o(&n.cfg)
	}
	n.ctx, n.cancel = context.WithTimeout(context.Background(), life)
	t.Cleanup(n.stop)
	n.startControlPlane(t)
	n.nse = n.startEndpoint(t, "nse-1", nseNS)
	var clientCtx context.Context
	clientCtx, n.stopClient = context.WithCancel(n.ctx)
	n.nsc = controlplane.NewClient(clientCtx, controlplane.ClientConfig{
		Name: "nsc-1", NSMgrURL: n.cp.NSMgrURL, InterfaceName: "nsm0", NetNSPath: nscNS.Path(),
		Elements: n.cfg.clientElements,
	})
	return n
}

// startControlPlane starts the pair's control plane (again: on the same
// sockets) as n.cp.
func (n *pairNode) startControlPlane(t *testing.T) {
	t.Helper()
	cp, err := controlplane.Start(n.ctx, n.cfg.cp)
	require.NoError(t, err)
	n.cps = append(n.cps, cp)
	n.cp = cp
}

// startEndpoint starts an endpoint of "svc" called name in ns, on a socket
// of its name: the same name serves again on the same path.
func (n *pairNode) startEndpoint(t *testing.T, name string, ns *testutil.NetNS) *controlplane.Endpoint {
	t.Helper()
	nse, err := controlplane.StartEndpoint(n.ctx, controlplane.EndpointConfig{
		Name: name, Service: "svc", NSMgrURL: n.cp.NSMgrURL, SocketPath: filepath.Join(n.dir, name+".sock"),
		NetNSPath: ns.Path(), Elements: []networkservice.NetworkServiceServer{ipContextServer{}},
	})
	require.NoError(t, err)
	n.endpoints = append(n.endpoints, nse)
	return nse
}

// request asks for the client's connection "nsc-1-conn" to "svc".
func (n *pairNode) request(t *testing.T) *networkservice.Connection {
	t.Helper()
	ctx, cancel := context.WithTimeout(n.ctx, time.Minute)
	defer cancel()
	conn, err := n.nsc.Request(ctx, &networkservice.NetworkServiceRequest{
		Connection: &networkservice.Connection{Id: "nsc-1-conn", NetworkService: "svc"},
	})
	require.NoError(t, err)
	return conn
}

// stop stops what the pair started, the latest first (a stopped one is
// not stopped again).
func (n *pairNode) stop() {
	if n.stopClient != nil {
		n.stopClient()
	}
	for i := len(n.endpoints) - 1; i >= 0; i-- {
		n.endpoints[i].Stop()
	}
	for i := len(n.cps) - 1; i >= 0; i-- {
		n.cps[i].Stop()
	}
	n.cancel()
}

// theVeth is the name of the one veth in ns.
func theVeth(t *testing.T, ns *testutil.NetNS) string {
	t.Helper()
	ends := veths(t, ns)
	require.Len(t, ends, 1, "veths in %s", ns.Name)
	for name := range ends {
		return name
	}
	return ""
}

// veths lists the veths in ns by name, with their indexes.
func veths(t *testing.T, ns *testutil.NetNS) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, l := range ns.Links(t) {
		if _, ok := l.(*netlink.Veth); ok {
			out[l.Attrs().Name] = l.Attrs().Index
		}
	}
	return out
}
