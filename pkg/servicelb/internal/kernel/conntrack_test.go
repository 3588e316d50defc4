package kernel

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netns"
)

// StaleFlows keeps the flows of a failed flush, once each, and hands them
// to the next flush with the new ones; a flush that works forgets them.
func TestStaleFlowsKeptUntilFlushed(t *testing.T) {
	a := StaleUDP{Service: netip.MustParseAddrPort("10.96.0.1:53")}
	b := StaleUDP{Service: netip.MustParseAddrPort("10.96.0.1:53"), Endpoint: netip.MustParseAddrPort("10.0.0.5:5353")}
	c := StaleUDP{Service: netip.MustParseAddrPort("10.96.0.2:53")}
	var got [][]StaleUDP
	fails := 2
	s := StaleFlows{FlushFunc: func(_ netns.NsHandle, stale []StaleUDP) (int, error) {
		got = append(got, slices.Clone(stale))
		if fails > 0 {
			fails--
			return 0, errors.New("injected")
		}
		return len(stale), nil
	}}
	_, err := s.Flush(netns.None(), []StaleUDP{b, a})
	require.ErrorContains(t, err, "2 kept for the next sync")
	_, err = s.Flush(netns.None(), []StaleUDP{a, c})
	require.ErrorContains(t, err, "3 kept for the next sync", "a flow queued twice is kept once")
	n, err := s.Flush(netns.None(), nil)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	n, err = s.Flush(netns.None(), nil)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, [][]StaleUDP{{b, a}, {a, b, a, c}, {a, b, c}}, got, "nothing is flushed after it worked")
}
