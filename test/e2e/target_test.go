package e2e_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
)

// TestTargetLeaves is scenario 4: a target closes its connection; its flows
// stop; after the release delay its addresses return to the IPAM and a new
// target gets them.
func TestTargetLeaves(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	names := l.Targets()
	leaving := names[0]
	addrs := l.TargetAddrs(leaving)
	require.Len(t, addrs, 2, "%s has an IPv4 and an IPv6 address", leaving)
	for _, a := range addrs {
		require.NotContains(t, vips(l), a.Addr())
	}

	require.NoError(t, l.StopTarget(leaving))
	stopped := time.Now()
	requireServed(t, ctx, l, names[1:], "the leaving target's flows stop")
	t.Logf("flows without %s %v after it left", leaving, time.Since(stopped).Round(time.Millisecond))

	// The proxy keeps the addresses for the release delay, then releases
	// them to the IPAM.
	require.Eventually(t, func() bool {
		held, err := proxyHolds(ctx, l, addrs)
		return err == nil && !held
	}, waitLong, poll, "the proxy releases %v", addrs)
	released := time.Since(stopped)
	t.Logf("%s's addresses %v released %v after it left (release delay %v)", leaving, addrs, released.Round(time.Millisecond), releaseDelay)

	// A new target gets the freed addresses: the IPAM hands out the lowest
	// free ones, and the others are still held by the remaining targets.
	newcomer := "target-9"
	joined := time.Now()
	require.NoError(t, l.StartTarget(newcomer))
	var got []netip.Prefix
	require.Eventually(t, func() bool {
		got = l.TargetAddrs(newcomer)
		return len(got) == len(addrs)
	}, waitLong, poll, "%s gets addresses", newcomer)
	require.ElementsMatch(t, addrs, got, "%s reuses %s's addresses", newcomer, leaving)
	t.Logf("%s got %v %v after it started", newcomer, got, time.Since(joined).Round(time.Millisecond))
	// The new target announces its addresses (gratuitous ARP / unsolicited
	// NA), so the LBs and the proxy drop the old target's MAC at once.
	requireServedWithin(t, ctx, l, append(slices.Clone(names[1:]), newcomer), waitLong, "the new target serves")
	t.Logf("FIGURE: a new target reusing released addresses serves %v after it started", time.Since(joined).Round(time.Millisecond))
}

// proxyHolds reports whether any connection of the proxy (live or pending
// release) holds one of addrs, leaving out the connections of the targets
// named in except (which may have been handed addresses released before).
func proxyHolds(ctx context.Context, l *labrun.Lab, addrs []netip.Prefix, except ...string) (bool, error) {
	st, err := proxyState(ctx, l)
	if err != nil {
		return false, err
	}
	for _, c := range st.Proxy.Connections {
		if slices.ContainsFunc(except, func(target string) bool { return strings.HasPrefix(c.ID, target+"-") }) {
			continue
		}
		for _, p := range c.Addresses {
			if slices.ContainsFunc(addrs, func(a netip.Prefix) bool { return a.Addr() == p.Addr() }) {
				return true, nil
			}
		}
	}
	return false, nil
}
