package controlplane_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/forwarder/reaper"
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
	n := startPair(t, nscNS, oldNS, 3*time.Minute)
	n.request(t)
	require.True(t, joined(t, nscNS, "nsm0", oldNS))
	// Let the forwarder see both pods alive.
	time.Sleep(3 * reaper.DefaultInterval)

	n.nse.Stop()
	oldNS.Remove(t)
	replaced := time.Now()
	n.startEndpoint(t, "nse-new", newNS)
	// The forwarder makes the veth pair before it sets the addresses: the
	// link may be seen joined a moment before it has them.
	require.Eventually(t, func() bool {
		if !joined(t, nscNS, "nsm0", newNS) {
			return false
		}
		addrs, err := globalAddrsIn(nscNS, "nsm0")
		return err == nil && slices.Equal(addrs, []string{"10.80.0.2/24"})
	}, 2*time.Minute, 100*time.Millisecond,
		"the client's interface is joined to the new endpoint's namespace, with its address")
	t.Logf("FIGURE: client joined to a replaced endpoint's new namespace %.1f s after the replacement",
		time.Since(replaced).Seconds())
	// Later sweeps (and a Close the reaper started for the old namespace)
	// leave the new link alone.
	time.Sleep(4 * reaper.DefaultInterval)
	require.True(t, joined(t, nscNS, "nsm0", newNS), "the new link is kept")
}
