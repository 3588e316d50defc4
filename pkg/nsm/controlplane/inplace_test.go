package controlplane_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
)

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
	tries := &requestCounter{}
	n := startPair(t, nscNS, nseNS, 2*time.Minute, withClientElements(tries))
	n.request(t)
	clientEnd, endpointEnd := veths(t, nscNS), veths(t, nseNS)
	require.Contains(t, clientEnd, "nsm0")
	require.Len(t, endpointEnd, 1, "the endpoint's end of the pair")
	addrs := addrsIn(t, nscNS, "nsm0")
	require.Equal(t, []string{"10.80.0.2/24"}, addrs)
	established := tries.ok.Load()

	first := n.nse.URL().String()
	n.nse.Stop()
	stopped := time.Now()
	again := n.startEndpoint(t, "nse-1", nseNS)
	require.Equal(t, first, again.URL().String(), "the same socket path")
	require.Eventually(t, func() bool { return tries.ok.Load() > established }, time.Minute, 50*time.Millisecond,
		"the client's heal re-requests through the endpoint's new run")
	t.Logf("FIGURE: connection re-established %v after the endpoint's stop, in %d tries",
		time.Since(stopped).Round(10*time.Millisecond), tries.n.Load()-established)
	require.Equal(t, clientEnd, veths(t, nscNS), "the client's end is kept")
	require.Equal(t, endpointEnd, veths(t, nseNS), "the endpoint's end is kept, under its name")
	require.Equal(t, addrs, addrsIn(t, nscNS, "nsm0"), "the client's end keeps its addresses")
}
