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
	"github.com/causeway-net/causeway/pkg/forwarder/reaper"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
)

// joined reports whether the client's interface name in nsc is one end of a
// veth whose other end is in nse.
func joined(t *testing.T, nsc *testutil.NetNS, name string, nse *testutil.NetNS) bool {
	t.Helper()
	l, err := linkIn(t, nsc, name)
	if err != nil {
		return false
	}
	for _, peer := range nse.Links(t) {
		if _, ok := peer.(*netlink.Veth); ok && peer.Attrs().Index == l.Attrs().ParentIndex &&
			peer.Attrs().ParentIndex == l.Attrs().Index {
			return true
		}
	}
	return false
}

// TestEndpointReplacedInANewNamespace: the endpoint's pod is replaced (the
// proxy's pod deleted, its DaemonSet's new pod started): the old endpoint
// stops and its namespace goes, and a new endpoint of the service, under
// another name, serves from a new namespace. The client's interface is
// still up at first (the forwarder's handle keeps the old namespace, and
// the veth in it); the forwarder's reaper closes that connection, and the
// client's heal reselects the new endpoint. The client's interface must
// end up joined to the new namespace, and stay so over later sweeps.
func TestEndpointReplacedInANewNamespace(t *testing.T) {
	nscNS := testutil.NewNetNS(t, "nsc")
	oldNS := testutil.NewNetNS(t, "old")
	newNS := testutil.NewNetNS(t, "new")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cp, err := controlplane.Start(ctx, controlplane.Config{Dir: dir, Name: "t"})
	require.NoError(t, err)
	defer cp.Stop()
	endpointIn := func(name string, ns *testutil.NetNS) *controlplane.Endpoint {
		nse, err := controlplane.StartEndpoint(ctx, controlplane.EndpointConfig{
			Name: name, Service: "svc", NSMgrURL: cp.NSMgrURL, SocketPath: filepath.Join(dir, name+".sock"),
			NetNSPath: ns.Path(), Elements: []networkservice.NetworkServiceServer{ipContextServer{}},
		})
		require.NoError(t, err)
		return nse
	}
	old := endpointIn("nse-old", oldNS)
	defer func() { old.Stop() }()
	clientCtx, clientCancel := context.WithCancel(ctx)
	defer clientCancel()
	nsc := controlplane.NewClient(clientCtx, controlplane.ClientConfig{
		Name: "nsc-1", NSMgrURL: cp.NSMgrURL, InterfaceName: "nsm0", NetNSPath: nscNS.Path(),
	})
	_, err = nsc.Request(ctx, &networkservice.NetworkServiceRequest{
		Connection: &networkservice.Connection{Id: "nsc-1-conn", NetworkService: "svc"},
	})
	require.NoError(t, err)
	require.True(t, joined(t, nscNS, "nsm0", oldNS))
	// Let the forwarder see both pods alive.
	time.Sleep(3 * reaper.DefaultInterval)

	old.Stop()
	oldNS.Remove(t)
	replaced := time.Now()
	nse := endpointIn("nse-new", newNS)
	defer nse.Stop()
	require.Eventually(t, func() bool { return joined(t, nscNS, "nsm0", newNS) }, 2*time.Minute, 100*time.Millisecond,
		"the client's interface is joined to the new endpoint's namespace")
	t.Logf("FIGURE: client joined to a replaced endpoint's new namespace %.1f s after the replacement",
		time.Since(replaced).Seconds())
	require.Equal(t, []string{"10.80.0.2/24"}, addrsOf(t, nscNS, "nsm0"))
	// Later sweeps (and a Close the reaper started for the old namespace)
	// leave the new link alone.
	time.Sleep(4 * reaper.DefaultInterval)
	require.True(t, joined(t, nscNS, "nsm0", newNS), "the new link is kept")

	clientCancel()
	nse.Stop()
	cp.Stop()
}
