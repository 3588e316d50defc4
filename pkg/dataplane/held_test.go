package dataplane

import (
	"errors"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/testutil"
)

// HoldLeftovers: a restarted Dataplane keeps what the earlier run left
// (ports, nexthops, VIP rules) beside every applied state; a connection
// that comes back on a new link supersedes its old one (deleted), and the
// release makes the kernel equal to the applied state, deleting the held
// links nothing claimed.
func TestHoldLeftovers(t *testing.T) {
	ns := testutil.NewNetNS(t, "hl")
	p1 := vethPair(t, ns, "p1", nil, "p1x")
	p2 := vethPair(t, ns, "p2", nil, "p2x")
	p3 := vethPair(t, ns, "p3", nil, "p3x")
	ns.MustExec(t, "ip", "addr", "add", "192.0.2.21/24", "dev", "p2")
	ns.MustExec(t, "ip", "addr", "add", "192.0.2.31/24", "dev", "p3")
	h := handle(t, ns)
	first := State{
		BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24")},
		Ports:       portsOf(p1, p2, p3),
		Nexthops:    []netip.Addr{ma("192.0.2.11"), ma("192.0.2.12")},
		VIPs:        []netip.Prefix{mp("203.0.113.10/32"), mp("203.0.113.11/32")},
	}
	dp1 := newDP(t, ns, Options{AdoptLeftovers: true})
	require.NoError(t, dp1.Apply(first))
	require.NoError(t, dp1.Close())

	dp := newDP(t, ns, Options{AdoptLeftovers: true, HoldLeftovers: true})
	// The restarted owner knows only its bridge address and one VIP yet.
	relearned := State{BridgeAddrs: first.BridgeAddrs, VIPs: []netip.Prefix{mp("203.0.113.11/32")}}
	require.NoError(t, dp.Apply(relearned))
	require.ElementsMatch(t, first.VIPs, rulesOf(t, h, 1, ProtocolCauseway), "the VIP rules are held")
	require.Equal(t, first.Nexthops, defaultRouteNexthops(t, h, v4, 1, ProtocolCauseway), "and the nexthops")
	for _, p := range []string{"p1", "p2", "p3"} {
		require.Contains(t, ns.MustExec(t, "ip", "link", "show", "dev", p), "master bridge0", "and the port %s", p)
	}
	snap, err := dp.Snapshot()
	require.NoError(t, err)
	require.NotNil(t, snap.Held)

	// p2's connection comes back on a new link with its address: p2 goes.
	p4 := vethPair(t, ns, "p4", nil, "p4x")
	ns.MustExec(t, "ip", "addr", "add", "192.0.2.21/24", "dev", "p4")
	relearned.Ports = []Port{{Index: p1}, {Index: p4, Claims: []netip.Addr{ma("192.0.2.21")}}}
	require.NoError(t, dp.Apply(relearned))
	_, err = h.LinkByIndex(p2)
	require.Error(t, err, "the superseded link is deleted")
	before := dp.Stats().WritesByOp["link del"]
	relearned.Ports[1].Claims = []netip.Addr{ma("192.0.2.21"), ma("192.0.2.99")}
	require.NoError(t, dp.Apply(relearned))
	require.Equal(t, before, dp.Stats().WritesByOp["link del"], "nothing more to supersede")

	// Release: the kernel is the applied state; p3, unclaimed, goes.
	relearned.ReleaseLeftovers = true
	require.NoError(t, dp.Apply(relearned))
	require.ElementsMatch(t, relearned.VIPs, rulesOf(t, h, 1, ProtocolCauseway))
	require.Nil(t, defaultRouteNexthops(t, h, v4, 1, ProtocolCauseway))
	_, err = h.LinkByIndex(p3)
	require.Error(t, err, "the held link nothing claimed is deleted")
	for _, p := range []string{"p1", "p4"} {
		require.Contains(t, ns.MustExec(t, "ip", "link", "show", "dev", p), "master bridge0")
	}
	snap, err = dp.Snapshot()
	require.NoError(t, err)
	require.Nil(t, snap.Held)
	before = dp.Stats().Writes
	require.NoError(t, dp.Apply(relearned), "a second release does nothing")
	require.Equal(t, before, dp.Stats().Writes)
}

// A held link that nothing claimed and whose deletion fails at the release
// stays held, and a later release deletes it: it is never forgotten with
// its addresses on it.
func TestHeldLinkWhoseDeleteFailsIsDeletedLater(t *testing.T) {
	ns, h, p1, first := earlierRunPort(t, "hlf")

	dp := newDP(t, ns, Options{AdoptLeftovers: true, HoldLeftovers: true})
	require.NoError(t, dp.Apply(State{BridgeAddrs: first.BridgeAddrs}))
	failing := refuseLinkDeletes(t)

	release := State{BridgeAddrs: first.BridgeAddrs, ReleaseLeftovers: true}
	require.Error(t, dp.Apply(release))
	_, err := h.LinkByIndex(p1)
	require.NoError(t, err, "not deleted yet")
	require.Contains(t, ns.MustExec(t, "ip", "link", "show", "dev", "p1"), "master bridge0", "still held as it was")

	failing.Store(false)
	require.NoError(t, dp.Apply(release))
	_, err = h.LinkByIndex(p1)
	require.Error(t, err, "the held link is deleted by the next release")
	snap, err := dp.Snapshot()
	require.NoError(t, err)
	require.Nil(t, snap.Held)
}

// A held link whose deletion fails when a connection supersedes it stays
// held: the release deletes it.
func TestSupersededHeldLinkWhoseDeleteFailsStaysHeld(t *testing.T) {
	ns, h, p1, first := earlierRunPort(t, "hls")

	dp := newDP(t, ns, Options{AdoptLeftovers: true, HoldLeftovers: true})
	p2 := vethPair(t, ns, "p2", nil, "p2x")
	ns.MustExec(t, "ip", "addr", "add", "192.0.2.21/24", "dev", "p2")
	relearned := State{BridgeAddrs: first.BridgeAddrs, Ports: portsOf(p2)}
	require.NoError(t, dp.Apply(relearned))
	failing := refuseLinkDeletes(t)

	relearned.Ports[0].Claims = []netip.Addr{ma("192.0.2.21")}
	require.NoError(t, dp.Apply(relearned), "a failed supersede is logged, not returned")
	snap, err := dp.Snapshot()
	require.NoError(t, err)
	require.Contains(t, indexes(snap.Held.Ports), p1, "the link that could not be deleted stays held")
	failing.Store(false)
	relearned.ReleaseLeftovers = true
	require.NoError(t, dp.Apply(relearned))
	_, err = h.LinkByIndex(p1)
	require.Error(t, err, "the superseded link is deleted at the release at the latest")
}

// earlierRunPort is a namespace where an earlier run of the dataplane left
// port p1 (with an address) on its bridge, in state first.
func earlierRunPort(t *testing.T, prefix string) (*testutil.NetNS, *netlink.Handle, int, State) {
	t.Helper()
	ns := testutil.NewNetNS(t, prefix)
	p1 := vethPair(t, ns, "p1", nil, "p1x")
	ns.MustExec(t, "ip", "addr", "add", "192.0.2.21/24", "dev", "p1")
	first := State{BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24")}, Ports: portsOf(p1)}
	dp := newDP(t, ns, Options{AdoptLeftovers: true})
	require.NoError(t, dp.Apply(first))
	require.NoError(t, dp.Close())
	return ns, handle(t, ns), p1, first
}

// refuseLinkDeletes makes the dataplane's link deletions fail while the
// returned flag is set (it is), until the test ends.
func refuseLinkDeletes(t *testing.T) *atomic.Bool {
	t.Helper()
	var failing atomic.Bool
	failing.Store(true)
	old := delLink
	delLink = func(h *netlink.Handle, l netlink.Link) error {
		if failing.Load() {
			return errors.New("injected: link delete refused")
		}
		return old(h, l)
	}
	t.Cleanup(func() { delLink = old })
	return &failing
}

// A first run holds nothing: its release says so at debug level only,
// not that leftovers of an earlier run were released.
func TestReleaseWithoutLeftoversSaysSo(t *testing.T) {
	ns := testutil.NewNetNS(t, "hn")
	var logs testutil.SyncBuffer
	dp := newDP(t, ns, Options{AdoptLeftovers: true, HoldLeftovers: true,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, dp.Apply(State{BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24")}}))
	require.NoError(t, dp.Apply(State{BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24")}, ReleaseLeftovers: true}))
	require.NotContains(t, logs.String(), "leftovers of an earlier run released")
	require.Contains(t, logs.String(), "level=DEBUG msg=\"no leftovers of an earlier run to release\"")
}
