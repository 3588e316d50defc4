package proxy

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSetVIPsValidatesAndRemoves: invalid entries are rejected, removed
// VIPs leave the dataplane state (whose Apply flushes their conntrack
// entries: pkg/dataplane's TestConntrackFlush, and end to end
// TestKernelProxyWithRealDataplane), and the same list again changes
// nothing.
func TestSetVIPsValidatesAndRemoves(t *testing.T) {
	e := newTestEnv(t)
	bad := []string{
		"0.0.0.0/0",     // default route
		"::/0",          // default route
		"172.16.0.0/16", // contains the node subnet 172.16.0.0/24
		"172.16.0.9/32", // inside it
		"fd00::/80",     // inside the IPv6 node subnet
	}
	list := prefixes(append([]string{"20.0.0.1/32", "2000::1/128", "40.0.0.0/24", "10.0.0.5/32"}, // valid
		append(bad, "20.0.0.1/32")...)...) // and a duplicate
	err := e.p.SetVIPs(list)
	require.Error(t, err)
	for _, b := range bad {
		require.ErrorContains(t, err, b)
	}
	s := e.dp.waitState(t, func(s dataplaneState) bool { return len(s.VIPs) == 4 })
	require.Equal(t, "[10.0.0.5/32 20.0.0.1/32 40.0.0.0/24 2000::1/128]", sprint(s.VIPs))
	require.Equal(t, uint64(5), e.p.Stats().VIPsRejected)

	// The same list again gives the same answer and asks for no Apply.
	applied := func() int { return len(e.dp.States()) }
	require.Eventually(t, func() bool { return e.p.Stats().Applies == uint64(applied()) }, waitFor, tick)
	n := applied()
	err = e.p.SetVIPs(list)
	for _, b := range bad {
		require.ErrorContains(t, err, b)
	}
	require.Equal(t, uint64(10), e.p.Stats().VIPsRejected)
	require.Never(t, func() bool { return applied() != n }, 50*time.Millisecond, tick)

	// Removing VIPs removes them from the state; kept ones stay.
	require.NoError(t, e.p.SetVIPs([]netip.Prefix{netip.MustParsePrefix("20.0.0.1/32")}))
	s = e.dp.waitState(t, func(s dataplaneState) bool { return len(s.VIPs) == 1 })
	require.Equal(t, "[20.0.0.1/32]", sprint(s.VIPs))
	require.NoError(t, e.p.SetVIPs([]netip.Prefix{netip.MustParsePrefix("20.0.0.1/32")}))
	require.NoError(t, e.p.SetVIPs(nil))
	e.dp.waitState(t, func(s dataplaneState) bool { return len(s.VIPs) == 0 })
	require.Equal(t, 0, e.p.Stats().VIPs)
}

// TestVIPRemovalRetriedWhileApplyFails: while Apply fails the removal is
// applied again until it succeeds (the dataplane flushes once the rule is
// gone).
func TestVIPRemovalRetriedWhileApplyFails(t *testing.T) {
	e := newTestEnv(t)
	require.NoError(t, e.p.SetVIPs([]netip.Prefix{netip.MustParsePrefix("20.0.0.1/32")}))
	e.dp.waitState(t, func(s dataplaneState) bool { return len(s.VIPs) == 1 })
	e.dp.FailNext(3)
	require.NoError(t, e.p.SetVIPs(nil))
	e.dp.waitState(t, func(s dataplaneState) bool { return len(s.VIPs) == 0 })
	require.Equal(t, uint64(3), e.p.Stats().ApplyErrors)
}

// An IPv4-only proxy installs no rule for the trench's IPv6 VIPs (Meridio
// does), and they are not counted as rejected.
func TestVIPsOfAnotherFamilyAreIgnored(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.Families = ParseIPFamily("ipv4") })
	require.NoError(t, e.p.SetVIPs(prefixes("20.0.0.1/32", "2000::1/128")))
	s := e.dp.waitState(t, func(s dataplaneState) bool { return len(s.VIPs) == 1 })
	require.Equal(t, "[20.0.0.1/32]", sprint(s.VIPs))
	require.Zero(t, e.p.Stats().VIPsRejected)
}

// prefixes parses prefixes written in a test.
func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}
