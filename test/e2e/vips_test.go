package e2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// conntrackEntries counts the proxy namespace's conntrack entries that
// involve addr, in either direction.
func conntrackEntries(t *testing.T, l *labrun.Lab, addr netip.Addr) int {
	t.Helper()
	family := "ipv4"
	if addr.Is6() {
		family = "ipv6"
	}
	out, err := l.Exec("proxy", "conntrack", "-L", "-f", family)
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "src="+addr.String()+" ") || strings.Contains(line, "dst="+addr.String()+" ") {
			n++
		}
	}
	return n
}

// hasRule reports whether the proxy namespace has a rule from vip.
func hasRule(t *testing.T, l *labrun.Lab, table int, vip netip.Prefix) bool {
	return slices.Contains(readProxyKernel(t, l, table).Rules, fmt.Sprintf("from %s lookup %d", vip, table))
}

// TestVIPChange is scenario 7: VIPs change at run time through the
// configuration file: the rules follow (how long it took is a FIGURE); a removed VIP
// stops being routed and its conntrack entries are gone; added back, it is
// routed again.
func TestVIPChange(t *testing.T) {
	all := []string{"203.0.113.1/32", "203.0.113.2/32", "2001:db8:20::1/128"}
	l := newLab(t, func(o *labrun.Options) { o.VIPs = all })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := proxyState(ctx, l)
	require.NoError(t, err)
	table := st.Dataplane.Table
	kept, removed := netip.MustParsePrefix(all[0]), netip.MustParsePrefix(all[1])
	require.True(t, hasRule(t, l, table, removed))

	// Conntrack in the proxy namespace (nothing uses it by default): the
	// targets' replies, routed by the proxy, then leave entries.
	for _, args := range [][]string{
		{"nft", "add", "table", "inet", "cwe2e"},
		{"nft", "add", "chain", "inet", "cwe2e", "forward", "{ type filter hook forward priority 0; }"},
		{"nft", "add", "rule", "inet", "cwe2e", "forward", "ct", "state", "new", "counter"},
	} {
		_, err := l.Exec("proxy", args...)
		require.NoError(t, err)
	}
	for _, vip := range []netip.Prefix{kept, removed} {
		tally, err := ingress(ctx, l, "udp", 30, []netip.Addr{vip.Addr()})
		require.NoError(t, err)
		require.Zero(t, tally.Errors, "%s: %v", vip, tally)
		require.Positive(t, conntrackEntries(t, l, vip.Addr()), "conntrack entries from %s", vip)
	}

	// Remove a VIP.
	changed := time.Now()
	require.NoError(t, l.SetVIPs([]string{all[0], all[2]}))
	require.Eventually(t, func() bool { return !hasRule(t, l, table, removed) }, waitLong, 10*time.Millisecond,
		"the rule of %s goes", removed)
	took := time.Since(changed)
	t.Logf("FIGURE: VIP removal: rule gone %v after the file changed", took.Round(time.Millisecond))
	require.True(t, hasRule(t, l, table, kept), "the kept VIP's rule stays")
	require.Eventually(t, func() bool { return conntrackEntries(t, l, removed.Addr()) == 0 }, waitLong, poll,
		"the removed VIP's conntrack entries go")
	require.Positive(t, conntrackEntries(t, l, kept.Addr()), "the kept VIP's conntrack entries stay")

	// The removed VIP is no longer routed out of the proxy; the kept one is.
	lis, err := traffic.ListenEgress(l.NetNSPath("ext"), egressPort)
	require.NoError(t, err)
	defer lis.Close()
	target := l.Targets()[0]
	dst := netip.AddrPortFrom(extFor(l, kept.Addr()), egressPort)
	send := func(src netip.Addr, tag string) {
		n, err := traffic.SendEgress(ctx, traffic.EgressFlows{NetNSPath: l.NetNSPath(target), Src: src, Dst: dst, Count: 20, Tag: tag})
		require.NoError(t, err)
		require.Equal(t, 20, n)
	}
	send(removed.Addr(), "removed")
	send(kept.Addr(), "kept")
	require.Eventually(t, func() bool { return len(lis.ByIface("kept")) > 0 }, waitLong, poll, "the kept VIP is routed")
	require.Empty(t, lis.ByIface("removed"), "flows from the removed VIP, sent first, never arrive")

	// Added back, it is routed again.
	changed = time.Now()
	require.NoError(t, l.SetVIPs(all))
	require.Eventually(t, func() bool { return hasRule(t, l, table, removed) }, waitLong, 10*time.Millisecond,
		"the rule of %s comes back", removed)
	took = time.Since(changed)
	t.Logf("FIGURE: VIP addition: rule present %v after the file changed", took.Round(time.Millisecond))
	require.Eventually(t, func() bool {
		send(removed.Addr(), "re-added")
		return len(lis.ByIface("re-added")) > 0
	}, waitLong, poll, "the re-added VIP is routed again")
}
