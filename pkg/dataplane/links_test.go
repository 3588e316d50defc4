package dataplane

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/testutil"
)

// State.Remove: Apply deletes a link a connection left (closed, or moved
// by a heal) only while its index still carries the name the caller knew,
// never a port of the State nor the bridge; the convergences after it do
// not repeat the request, and a link already gone is no error.
func TestRemoveLinks(t *testing.T) {
	ns := testutil.NewNetNS(t, "rt")
	peer := testutil.NewNetNS(t, "rtp")
	old := vethPair(t, ns, "old0", peer, "old0p")
	renamed := vethPair(t, ns, "ren0", nil, "ren0p")
	kept := vethPair(t, ns, "kept0", nil, "kept0p")
	h := handle(t, ns)
	dp := newDP(t, ns, Options{})

	s := State{Ports: portsOf(kept), Remove: []LinkRef{
		{Index: old, Name: "old0"}, {Index: renamed, Name: "ren-before"}, {Index: kept, Name: "kept0"},
		{Index: dp.BridgeIndex(), Name: DefaultBridgeName},
	}}
	require.NoError(t, dp.Apply(s))
	_, err := h.LinkByIndex(old)
	require.ErrorAs(t, err, &netlink.LinkNotFoundError{}, "the link is gone")
	require.NotContains(t, peer.MustExec(t, "ip", "-br", "link"), "old0p", "with its peer")
	_, err = h.LinkByIndex(renamed)
	require.NoError(t, err, "an index that names another link stays")
	l, err := h.LinkByIndex(kept)
	require.NoError(t, err, "a port of the State stays")
	require.Equal(t, dp.BridgeIndex(), l.Attrs().MasterIndex)
	_, err = h.LinkByName(DefaultBridgeName)
	require.NoError(t, err, "the bridge stays")
	require.Equal(t, uint64(1), dp.Stats().WritesByOp["link del"], "one delete written")

	require.NoError(t, dp.Apply(s), "a link already gone is no error")
	require.Equal(t, uint64(1), dp.Stats().WritesByOp["link del"])
}

// A link of State.Remove that cannot be deleted fails the Apply (its
// caller must know it gone before it hands its addresses back); the next
// Apply that carries it deletes it.
func TestRemoveLinkFailureIsReturned(t *testing.T) {
	ns := testutil.NewNetNS(t, "rf")
	idx := vethPair(t, ns, "left0", nil, "left0p")
	h := handle(t, ns)
	dp := newDP(t, ns, Options{})
	failing := refuseLinkDeletes(t)

	s := State{Remove: []LinkRef{{Index: idx, Name: "left0"}}}
	require.Error(t, dp.Apply(s))
	_, err := h.LinkByIndex(idx)
	require.NoError(t, err, "still there")
	failing.Store(false)
	require.NoError(t, dp.Apply(s))
	_, err = h.LinkByIndex(idx)
	require.ErrorAs(t, err, &netlink.LinkNotFoundError{})
}
