package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestProxyCrash is scenario 5: the proxy is killed with SIGKILL and
// started again: the targets keep their addresses, the kernel state is
// rebuilt without duplicates, traffic resumes; the outage is reported.
func TestProxyCrash(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := proxyState(ctx, l)
	require.NoError(t, err)
	require.NotNil(t, st.Dataplane)
	table := st.Dataplane.Table
	addrs := targetAddrs(l)
	before := readProxyKernel(t, l, table)
	require.Len(t, before.Rules, len(l.VIPs()), "one rule per VIP: %v", before.Rules)
	require.Len(t, before.Ports, len(l.LBs())+len(l.Targets()), "a bridge port per LB and target: %v", before.Ports)
	require.Empty(t, duplicates(before.Rules))

	ps := startProbers(t, ctx, l, vipOf(t, l, true))
	waitProbes(t, ps, time.Time{}, 20, "probes before the crash")
	killed := mark(ps, "proxy killed")
	require.NoError(t, l.KillProxy())
	restarted := mark(ps, "proxy restarted")
	require.NoError(t, l.StartProxy())
	t.Logf("proxy restarted %v after the kill", restarted.Sub(killed).Round(time.Millisecond))

	// Traffic resumes through every target; the targets keep their
	// addresses.
	requireServed(t, ctx, l, l.Targets(), "traffic after the proxy restart")
	require.Eventually(t, func() bool {
		st, err := proxyState(ctx, l)
		return err == nil && len(st.Proxy.Connections) >= len(l.Targets())+len(l.LBs())
	}, waitLong, poll, "the restarted proxy knows every connection again")
	for name, a := range addrs {
		require.ElementsMatch(t, a, l.TargetAddrs(name), "%s keeps its addresses", name)
	}

	// The kernel state is rebuilt, not duplicated.
	var after proxyKernel
	require.Eventually(t, func() bool {
		after = readProxyKernel(t, l, table)
		return len(after.Ports) == len(before.Ports) && len(after.Routes) == len(before.Routes)
	}, waitLong, poll, "the bridge gets its ports back (before %v)", before)
	require.Empty(t, duplicates(after.Rules), "no duplicate rule: %v", after.Rules)
	require.Empty(t, duplicates(after.Routes), "no duplicate route: %v", after.Routes)
	require.Equal(t, before.Rules, after.Rules)
	require.Equal(t, before.Routes, after.Routes)
	require.Equal(t, len(before.Ports), len(after.Ports))

	waitProbes(t, ps, time.Now(), 20, "probes after the restart")
	for network, p := range ps {
		s := p.Stop().After(killed.Add(-time.Second))
		t.Logf("FIGURE: proxy crash outage (%s): %v; probes %v", network, s.LongestGap(), s)
		require.False(t, s.LongestGap().Open, "%s: traffic resumed", network)
	}
}
