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

// veths lists the veths in ns by name, with their indexes.
func veths(t *testing.T, ns *testutil.NetNS) map[string]int {
	t.Helper()
	h, err := netlink.NewHandleAt(ns.Handle)
	require.NoError(t, err)
	defer h.Close()
	links, err := h.LinkList()
	require.NoError(t, err)
	out := map[string]int{}
	for _, l := range links {
		if _, ok := l.(*netlink.Veth); ok {
			out[l.Attrs().Name] = l.Attrs().Index
		}
	}
	return out
}

// TestEndpointRestartedInPlaceKeepsTheLink: an endpoint stopped and started
// again in its namespace on the same socket path (a new socket, so a new
// URL in the registry), as the proxy's container restarted in its pod. The
// NSMgr reports the connection down when the endpoint goes; the client's
// heal re-requests it as it is, its interface being up (it does not
// reselect, which would close the connection first); the forwarder keeps
// the veth pair while the connection moves to the endpoint's new URL and
// asks the new run for the same interface. Both ends keep their names and
// indexes, and the client's end its addresses.
func TestEndpointRestartedInPlaceKeepsTheLink(t *testing.T) {
	nscNS := testutil.NewNetNS(t, "nsc")
	nseNS := testutil.NewNetNS(t, "nse")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cp, err := controlplane.Start(ctx, controlplane.Config{Dir: dir, Name: "t"})
	require.NoError(t, err)
	defer cp.Stop()
	epCfg := controlplane.EndpointConfig{
		Name: "nse-1", Service: "svc", NSMgrURL: cp.NSMgrURL, SocketPath: filepath.Join(dir, "nse.sock"),
		NetNSPath: nseNS.Path(), Elements: []networkservice.NetworkServiceServer{ipContextServer{}},
	}
	nse, err := controlplane.StartEndpoint(ctx, epCfg)
	require.NoError(t, err)
	defer func() { nse.Stop() }()

	tries := &requestCounter{}
	clientCtx, clientCancel := context.WithCancel(ctx)
	defer clientCancel()
	nsc := controlplane.NewClient(clientCtx, controlplane.ClientConfig{
		Name: "nsc-1", NSMgrURL: cp.NSMgrURL, InterfaceName: "nsm0", NetNSPath: nscNS.Path(),
		Elements: []networkservice.NetworkServiceClient{tries},
	})
	_, err = nsc.Request(ctx, &networkservice.NetworkServiceRequest{
		Connection: &networkservice.Connection{Id: "nsc-1-conn", NetworkService: "svc"},
	})
	require.NoError(t, err)
	clientEnd, endpointEnd := veths(t, nscNS), veths(t, nseNS)
	require.Contains(t, clientEnd, "nsm0")
	require.Len(t, endpointEnd, 1, "the endpoint's end of the pair")
	addrs := addrsOf(t, nscNS, "nsm0")
	require.Equal(t, []string{"10.80.0.2/24"}, addrs)
	established := tries.ok.Load()

	first := nse.URL().String()
	nse.Stop()
	stopped := time.Now()
	nse, err = controlplane.StartEndpoint(ctx, epCfg)
	require.NoError(t, err)
	require.Equal(t, first, nse.URL().String(), "the same socket path")
	require.Eventually(t, func() bool { return tries.ok.Load() > established }, time.Minute, 50*time.Millisecond,
		"the client's heal re-requests through the endpoint's new run")
	t.Logf("FIGURE: connection re-established %v after the endpoint's stop, in %d tries",
		time.Since(stopped).Round(10*time.Millisecond), tries.n.Load()-established)
	require.Equal(t, clientEnd, veths(t, nscNS), "the client's end is kept")
	require.Equal(t, endpointEnd, veths(t, nseNS), "the endpoint's end is kept, under its name")
	require.Equal(t, addrs, addrsOf(t, nscNS, "nsm0"), "the client's end keeps its addresses")

	clientCancel()
	nse.Stop()
	cp.Stop()
}
