package forwarder

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/forwarder/reaper"
)

// TestVethKeptWhenTheEndpointMoves: the endpoint restarted in its namespace
// and listens on a new URL; the dial client closes the connection toward
// the old URL within the NSC's Request and requests through the new one,
// without the mechanism it had (mechanism translation forgot it). The
// pair is kept, both ends with their indexes, and the endpoint is asked for
// the interface name it had. A Close from the NSC removes the pair.
func TestVethKeptWhenTheEndpointMoves(t *testing.T) {
	m := establish(t, "m", nil)
	nsc, nse, nseName := m.nsc, m.nse, m.nseName
	nscIndex, nseIndex := index(t, nsc, "nsm0"), index(t, nse, nseName)
	require.NotZero(t, nscIndex)
	require.NotZero(t, nseIndex)

	m.request(t, true)
	require.Equal(t, nscIndex, index(t, nsc, "nsm0"), "the NSC's end is kept")
	require.Equal(t, nseIndex, index(t, nse, nseName), "the endpoint's end is kept, under its name")
	require.Equal(t, []string{nseName}, vethsIn(t, nse), "the kept end only, no second pair")

	_, err := m.fwd.Close(m.ctx, m.conn())
	require.NoError(t, err)
	require.Zero(t, index(t, nsc, "nsm0"), "a Close from the NSC removes the pair")
	require.Zero(t, index(t, nse, nseName))
}

// TestMovedConnectionReapedWithItsPod: the reaper and the move together.
// An endpoint that moves to a new URL in its own namespace is not judged
// gone: sweeps after the move keep the pair. When the endpoint's pod then
// goes (its namespace's mount gone, nothing running in it), the reaper's
// Close, which comes through begin and not within a Request, removes the
// pair as any other Close does.
func TestMovedConnectionReapedWithItsPod(t *testing.T) {
	reap := reaper.New()
	m := establish(t, "mr", reap)
	ctx, nsc, nse := m.ctx, m.nsc, m.nse
	nscIndex := index(t, nsc, "nsm0")
	require.NotZero(t, nscIndex)
	reap.Sweep(ctx) // both ends seen alive

	m.request(t, true)
	reap.Sweep(ctx)
	reap.Sweep(ctx)
	require.Equal(t, nscIndex, index(t, nsc, "nsm0"), "a move is not a dead pod: the pair is kept")
	require.NotZero(t, index(t, nse, m.nseName))

	nse.Remove(t)
	reap.Sweep(ctx)
	reap.Sweep(ctx)
	require.Zero(t, index(t, nsc, "nsm0"), "the reaper's Close after a move removes the pair")
}

// vethsIn lists the names of the veths in ns.
func vethsIn(t *testing.T, ns *testutil.NetNS) []string {
	t.Helper()
	var out []string
	for _, l := range ns.Links(t) {
		if _, ok := l.(*netlink.Veth); ok {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}

// TestMoveToANewPodReplacesThePair: the endpoint's pod is replaced (a new
// namespace) and the NSC's connection moves to the new pod's URL within
// its Request, as a move in the same namespace does. The pair kept through
// the move's Close must not stay in the old pod's namespace: the Request
// that follows replaces it, the NSC's end joined to an end in the new
// namespace, and nothing left in the old one. A move back within the new
// namespace keeps that pair.
func TestMoveToANewPodReplacesThePair(t *testing.T) {
	m := establish(t, "p", nil)
	nsc, oldNS, nseName := m.nsc, m.nse, m.nseName
	newNS := testutil.NewNetNS(t, "pn")
	require.Equal(t, []string{nseName}, vethsIn(t, oldNS))

	m.ep.netnsURL = "file://" + newNS.Path()
	m.request(t, true)
	require.Empty(t, vethsIn(t, oldNS), "nothing is left in the old pod's namespace")
	require.Equal(t, []string{nseName}, vethsIn(t, newNS), "the endpoint's end is in the new pod's namespace, under its name")
	nscEnd, err := linkIn(nsc.Handle, "nsm0")
	require.NoError(t, err)
	require.Equal(t, newNS.LinkIndex(t, nseName), nscEnd.Attrs().ParentIndex, "the NSC's end is joined to it")
	nseIndex := newNS.LinkIndex(t, nseName)
	nscIndex := nscEnd.Attrs().Index

	m.request(t, true)
	require.Equal(t, nscIndex, index(t, nsc, "nsm0"), "a move within the new pod's namespace keeps the pair")
	require.Equal(t, nseIndex, newNS.LinkIndex(t, nseName))
}
