package proxyd

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/nexthopcheck"
)

// A feed watches the addresses on the bridge again only when they or the
// bridge's index changed.
func TestCheckFeedWatchesChanges(t *testing.T) {
	c := offChecker(t)
	addrs := []netip.Addr{netip.MustParseAddr("172.16.0.2"), netip.MustParseAddr("fd00::2")}
	watches := 0
	f := &checkFeed{c: c, addrs: func() []netip.Addr { return addrs }, after: func() { watches++ }}
	f.feed(2)
	f.feed(2)
	require.Equal(t, 1, watches, "nothing changed")
	f.feed(3)
	require.Equal(t, 2, watches, "the bridge was re-created")
	addrs = addrs[:1]
	f.feed(3)
	require.Equal(t, 3, watches)
	st := c.Statuses()
	require.Len(t, st, 1)
	require.Equal(t, nexthopcheck.Peer{Addr: addrs[0], LinkIndex: 3}, st[0].Peer)
}

func TestDownOf(t *testing.T) {
	a, b := netip.MustParseAddr("172.16.0.2"), netip.MustParseAddr("172.16.0.3")
	require.Equal(t, []netip.Addr{b}, downOf([]nexthopcheck.Status{
		{Peer: nexthopcheck.Peer{Addr: a}, State: nexthopcheck.Up},
		{Peer: nexthopcheck.Peer{Addr: b}, State: nexthopcheck.Down},
	}))
}

// The readiness warning names every nexthop and target found down.
func TestDatapathWarning(t *testing.T) {
	st := func(addr string, state nexthopcheck.State) nexthopcheck.Status {
		return nexthopcheck.Status{Peer: nexthopcheck.Peer{Addr: netip.MustParseAddr(addr)}, State: state}
	}
	require.Empty(t, datapathWarning([]nexthopcheck.Status{st("172.16.0.2", nexthopcheck.Up), st("172.16.0.3", nexthopcheck.Unchecked)}, nil))
	require.Equal(t, "nexthop 172.16.0.3 down, nexthop fd00::3 down, target 172.16.1.9 not answering", datapathWarning(
		[]nexthopcheck.Status{st("172.16.0.2", nexthopcheck.Up), st("172.16.0.3", nexthopcheck.Down), st("fd00::3", nexthopcheck.Down)},
		[]nexthopcheck.Status{st("172.16.1.8", nexthopcheck.Up), st("172.16.1.9", nexthopcheck.Down)}))
}

// offChecker is a check that accepts peers and probes nothing, closed with
// t.
func offChecker(t *testing.T) *nexthopcheck.Checker {
	c, err := nexthopcheck.New(nexthopcheck.Settings{Off: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}
