package dataplane

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/testutil"
)

// RemoveLink deletes a left-over link only while its index still carries
// the name the caller knew, never the bridge.
func TestRemoveLink(t *testing.T) {
	ns := testutil.NewNetNS(t, "rl")
	peer := testutil.NewNetNS(t, "rlp")
	idx := vethPair(t, ns, "left0", peer, "left0p")
	h := handle(t, ns)
	dp := newDP(t, ns, Options{})

	removed, err := dp.RemoveLink(idx, "another")
	require.NoError(t, err)
	require.False(t, removed, "the index names another link now")
	_, err = h.LinkByIndex(idx)
	require.NoError(t, err, "so it stays")

	_, err = dp.RemoveLink(dp.BridgeIndex(), "bridge0")
	require.Error(t, err, "the bridge is refused")
	_, err = h.LinkByName("bridge0")
	require.NoError(t, err)

	removed, err = dp.RemoveLink(idx, "left0")
	require.NoError(t, err)
	require.True(t, removed)
	_, err = h.LinkByIndex(idx)
	require.ErrorAs(t, err, &netlink.LinkNotFoundError{}, "the link is gone")
	peerLinks := peer.MustExec(t, "ip", "-br", "link")
	require.NotContains(t, peerLinks, "left0p", "with its peer")

	removed, err = dp.RemoveLink(idx, "left0")
	require.NoError(t, err)
	require.False(t, removed, "a link already gone is no error")
	require.Equal(t, uint64(1), dp.Stats().WritesByOp["link del"], "one delete written")
}

// State.Retired: Apply deletes a link a connection had before its heal,
// unless it is a port of the State or its index names another link now;
// the convergences after it do not repeat the request.
func TestRetiredLinks(t *testing.T) {
	ns := testutil.NewNetNS(t, "rt")
	old := vethPair(t, ns, "old0", nil, "old0p")
	renamed := vethPair(t, ns, "ren0", nil, "ren0p")
	kept := vethPair(t, ns, "kept0", nil, "kept0p")
	h := handle(t, ns)
	dp := newDP(t, ns, Options{})

	require.NoError(t, dp.Apply(State{Ports: []int{kept}, Retired: []LinkRef{
		{Index: old, Name: "old0"}, {Index: renamed, Name: "ren-before"}, {Index: kept, Name: "kept0"},
	}}))
	_, err := h.LinkByIndex(old)
	require.ErrorAs(t, err, &netlink.LinkNotFoundError{}, "the retired link is gone")
	_, err = h.LinkByIndex(renamed)
	require.NoError(t, err, "an index that names another link stays")
	l, err := h.LinkByIndex(kept)
	require.NoError(t, err, "a port of the State stays")
	require.Equal(t, dp.BridgeIndex(), l.Attrs().MasterIndex)
	require.Equal(t, uint64(1), dp.Stats().WritesByOp["link del"], "one delete written")
}
