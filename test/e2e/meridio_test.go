package e2e_test

import (
	"context"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
)

// seedMeridioLayout writes into the proxy namespace what Meridio's proxy
// leaves there, with the calls it makes: beside every VIP rule of table a
// rule `from <VIP> lookup <table>` added without protocol (the kernel
// picks its priority), and the table's default routes replaced by copies
// without protocol (so with the netlink library's default, boot).
func seedMeridioLayout(t *testing.T, l *labrun.Lab, table int) {
	t.Helper()
	h := proxyHandle(t, l)
	defer h.Close()
	rules, err := h.RuleListFiltered(netlink.FAMILY_ALL, &netlink.Rule{Table: table}, netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	for _, r := range rules {
		if r.Src == nil {
			continue
		}
		m := netlink.NewRule()
		m.Table, m.Src, m.Family = table, r.Src, r.Family
		require.NoError(t, h.RuleAdd(m), "Meridio's rule from %s", r.Src)
	}
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	for _, r := range routes {
		m := netlink.Route{Family: r.Family, Table: table, Dst: r.Dst, Gw: r.Gw, LinkIndex: r.LinkIndex, MultiPath: r.MultiPath}
		require.NoError(t, h.RouteReplace(&m), "Meridio's route %v", r.Dst)
	}
}

// TestMovingFromMeridioProxy: the proxy started in a namespace where
// Meridio's proxy ran (its VIP rules and table routes without Causeway's
// protocol, a foreign rule to another table) ends with exactly one rule per
// VIP and its own routes; the foreign rule stays; a VIP removed later leaves
// no rule.
func TestMovingFromMeridioProxy(t *testing.T) {
	all := []string{"203.0.113.1/32", "203.0.113.2/32", "2001:db8:20::1/128"}
	l := newLab(t, func(o *labrun.Options) { o.VIPs = all })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := proxyState(ctx, l)
	require.NoError(t, err)
	table := st.Dataplane.Table
	before := readProxyKernel(t, l, table)
	require.Len(t, before.Rules, len(all), "one rule per VIP: %v", before.Rules)

	ps := startProbers(t, ctx, l, vipOf(t, l, true))
	waitProbes(t, ps, time.Time{}, 20, "probes before the move")
	killed := mark(ps, "Meridio's proxy stopped")
	require.NoError(t, l.KillProxy())
	seedMeridioLayout(t, l, table)
	_, err = l.Exec("proxy", "ip", "rule", "add", "from", all[0], "lookup", "100")
	require.NoError(t, err)
	seeded := readProxyKernel(t, l, table)
	require.Len(t, seeded.Rules, 2*len(all), "two rules per VIP, as issue 13 found: %v", seeded.Rules)
	out, err := l.Exec("proxy", "ip", "-d", "route", "show", "table", strconv.Itoa(table))
	require.NoError(t, err)
	require.Contains(t, out, "proto boot", "the table holds Meridio's routes")

	require.NoError(t, l.StartProxy())
	requireServed(t, ctx, l, l.Targets(), "traffic after the move")
	log, err := os.ReadFile(l.Logs("proxy"))
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(log), `"msg":"Meridio leftovers removed"`), "one line for the rules, one for the routes")
	var after proxyKernel
	require.Eventually(t, func() bool {
		after = readProxyKernel(t, l, table)
		return slices.Equal(after.Rules, before.Rules) && slices.Equal(after.Routes, before.Routes)
	}, waitLong, poll, "one rule per VIP and the proxy's own routes (before %v)", before)
	require.Empty(t, duplicates(after.Rules))
	out, err = l.Exec("proxy", "ip", "-d", "route", "show", "table", strconv.Itoa(table))
	require.NoError(t, err)
	require.NotContains(t, out, "proto boot", "Meridio's routes are gone")
	out, err = l.Exec("proxy", "ip", "rule", "show", "table", "100")
	require.NoError(t, err)
	require.Contains(t, out, "from "+strings.TrimSuffix(all[0], "/32")+" lookup 100", "the foreign rule stays")

	waitProbes(t, ps, time.Now(), 20, "probes after the move")
	for network, p := range ps {
		s := p.Stop().After(killed.Add(-time.Second))
		t.Logf("FIGURE: outage of a move from Meridio's proxy, stop to served (%s): %v; probes %v", network, s.LongestGap(), s)
		require.False(t, s.LongestGap().Open, "%s: traffic resumed", network)
	}

	// A VIP removed later leaves no rule at all.
	removed := netip.MustParsePrefix(all[1])
	require.NoError(t, l.SetVIPs([]string{all[0], all[2]}))
	require.Eventually(t, func() bool { return !hasRule(t, l, table, removed) }, waitLong, poll, "no rule from %s", removed)
	require.Len(t, readProxyKernel(t, l, table).Rules, 2)
}
