package proxy

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSetVIPsValidatesAndFlushesRemoved(t *testing.T) {
	e := newTestEnv(t)
	err := e.p.SetVIPStrings([]string{
		"20.0.0.1/32", "2000::1/128", "40.0.0.0/24", "10.0.0.5", // valid (a bare address is a host prefix)
		"not-an-ip",     // unparsable
		"0.0.0.0/0",     // default route
		"::/0",          // default route
		"172.16.0.0/16", // contains the node subnet 172.16.0.0/24
		"172.16.0.9/32", // inside it
		"fd00::/80",     // inside the IPv6 node subnet
		"20.0.0.1/32",   // duplicate
	})
	require.Error(t, err)
	for _, bad := range []string{"not-an-ip", "0.0.0.0/0", "::/0", "172.16.0.0/16", "172.16.0.9/32", "fd00::/80"} {
		require.ErrorContains(t, err, bad)
	}
	s := e.dp.waitState(t, func(s dataplaneState) bool { return len(s.VIPs) == 4 })
	require.Equal(t, "[10.0.0.5/32 20.0.0.1/32 40.0.0.0/24 2000::1/128]", sprint(s.VIPs))
	require.Equal(t, uint64(6), e.p.Stats().VIPsRejected)

	// Removing VIPs flushes their conntrack entries; kept ones are not.
	require.NoError(t, e.p.SetVIPs([]netip.Prefix{netip.MustParsePrefix("20.0.0.1/32")}))
	s = e.dp.waitState(t, func(s dataplaneState) bool { return len(s.VIPs) == 1 })
	require.Equal(t, "[20.0.0.1/32]", sprint(s.VIPs))
	require.Eventually(t, func() bool { return len(e.dp.flushes()) == 3 }, waitFor, tick)
	require.ElementsMatch(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32"),
		netip.MustParsePrefix("40.0.0.0/24"), netip.MustParsePrefix("2000::1/128")}, e.dp.flushes())

	// The same list again: no change, no flush.
	require.NoError(t, e.p.SetVIPs([]netip.Prefix{netip.MustParsePrefix("20.0.0.1/32")}))
	require.NoError(t, e.p.SetVIPs(nil))
	require.Eventually(t, func() bool { return len(e.dp.flushes()) == 4 }, waitFor, tick)
	require.Equal(t, 0, e.p.Stats().VIPs)
}

// TestVIPFlushWaitsForApply: the flush comes after the dataplane dropped
// the rule; while Apply fails it is kept for later.
func TestVIPFlushWaitsForApply(t *testing.T) {
	e := newTestEnv(t)
	require.NoError(t, e.p.SetVIPs([]netip.Prefix{netip.MustParsePrefix("20.0.0.1/32")}))
	e.dp.waitState(t, func(s dataplaneState) bool { return len(s.VIPs) == 1 })
	e.dp.mu.Lock()
	e.dp.failNext = 3
	e.dp.mu.Unlock()
	require.NoError(t, e.p.SetVIPs(nil))
	e.dp.waitState(t, func(s dataplaneState) bool { return len(s.VIPs) == 0 })
	require.Equal(t, uint64(3), e.p.Stats().ApplyErrors)
	require.Eventually(t, func() bool { return len(e.dp.flushes()) == 1 }, waitFor, tick)
}

// An IPv4-only proxy installs no rule for the trench's IPv6 VIPs (Meridio
// does), and they are not counted as rejected.
func TestVIPsOfAnotherFamilyAreIgnored(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.Families = ParseIPFamily("ipv4") })
	require.NoError(t, e.p.SetVIPStrings([]string{"20.0.0.1/32", "2000::1/128"}))
	s := e.dp.waitState(t, func(s dataplaneState) bool { return len(s.VIPs) == 1 })
	require.Equal(t, "[20.0.0.1/32]", sprint(s.VIPs))
	require.Zero(t, e.p.Stats().VIPsRejected)
}

func TestParseVIPs(t *testing.T) {
	ok, errs := ParseVIPs([]string{" 20.0.0.1/32 ", "::ffff:1.2.3.4", "::ffff:10.0.0.0/120", "x", "::ffff:0:0/80"})
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("20.0.0.1/32"), netip.MustParsePrefix("1.2.3.4/32"),
		netip.MustParsePrefix("10.0.0.0/24")}, ok)
	require.Len(t, errs, 2)
}
