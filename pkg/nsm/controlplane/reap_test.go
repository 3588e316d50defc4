package controlplane_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/forwarder/reaper"
)

// TestDeadClientLosesItsLink runs the real control plane (the SDK's NSMgr
// and the project's forwarder): a client's pod goes without closing its
// connection (it stops, and its namespace loses its mount with nothing
// left running in it). The NSMgr still holds the client's namespace open
// until the connection expires (its token lives ten minutes), yet the veth
// end in the endpoint's namespace goes within a few of the forwarder's
// sweeps.
func TestDeadClientLosesItsLink(t *testing.T) {
	nscNS := testutil.NewNetNS(t, "nsc")
	nseNS := testutil.NewNetNS(t, "nse")
	n := startPair(t, nscNS, nseNS, 3*time.Minute)
	n.request(t)
	nseEnd := theVeth(t, nseNS)
	// Let the forwarder see both pods alive.
	time.Sleep(3 * reaper.DefaultInterval)

	n.stopClient() // the client stops: no refresh, no Close
	_, err := linkIn(t, nseNS, nseEnd)
	require.NoError(t, err, "the client's stop removed nothing")
	gone := time.Now()
	nscNS.Remove(t)
	require.Eventually(t, func() bool {
		_, err := linkIn(t, nseNS, nseEnd)
		return err != nil
	}, time.Minute, 50*time.Millisecond, "the dead client's link left the endpoint's namespace")
	t.Logf("FIGURE: a dead client's link left the endpoint's namespace %.1f s after its pod (sweeps every %s)",
		time.Since(gone).Seconds(), reaper.DefaultInterval)
}
