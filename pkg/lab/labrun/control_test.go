package labrun

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestComponentControl drives the components the way the end-to-end
// scenarios do and requires every check to turn green again after each
// step: an LB dies with its namespace and comes back, a target leaves and a
// new one joins, the proxy and the IPAM are killed and restarted; then the
// VIPs change.
func TestComponentControl(t *testing.T) {
	l, ctx, _, _ := testLab(t, 5*time.Minute)
	// rows: components, 2 per target, bridge ports, routes, 4 traffic, LB
	// replies, 2 per service (TCP, UDP).
	rows := func(targets int) int { return 1 + 2*targets + 1 + 1 + 4 + 1 + 2*len(LabServices) }
	green := func(step string, targets int) {
		t.Helper()
		var rep Report
		var err error
		deadline := time.Now().Add(2 * time.Minute)
		for {
			rep, err = l.Check(ctx)
			if err == nil && rep.OK() && len(rep.Rows) == rows(targets) {
				return
			}
			if time.Now().After(deadline) {
				var b strings.Builder
				rep.Print(&b)
				_, _ = l.Status(&b)
				t.Fatalf("%s: checks not green (%v):\n%s", step, err, b.String())
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	bridgePortCount := func() int {
		ports, err := bridgePorts(l.NetNSPath("proxy"))
		require.NoError(t, err)
		return len(ports)
	}
	green("up", 3)

	// A target leaves; a new one joins.
	require.NoError(t, l.StopTarget("target-3"))
	require.Empty(t, l.TargetAddrs("target-3"), "a stopped target withdraws its publication")
	green("target-3 stopped", 2)
	require.NoError(t, l.StartTarget("target-4"))
	require.Equal(t, []string{"target-1", "target-2", "target-3", "target-4"}, l.Targets())
	green("target-4 joined", 3)

	// Proxy and IPAM crashes.
	before := l.TargetAddrs("target-1")
	require.NoError(t, l.KillProxy())
	require.NoError(t, l.StartProxy())
	green("proxy restarted", 3)
	require.Equal(t, before, l.TargetAddrs("target-1"), "a target keeps its addresses across a proxy restart")
	require.NoError(t, l.KillIPAM())
	require.NoError(t, l.StartIPAM())
	green("ipam restarted", 3)

	// An LB dies as a pod would: its port goes at once, the external host
	// routes over the other LB only, and everything works through it.
	require.NoError(t, l.KillLB("lb-a", true))
	require.False(t, exists(l.NetNSPath("lb-a")))
	require.Error(t, l.KillLB("lb-a", false), "lb-a is not running")
	out, err := l.Exec("ext", "ip", "route", "show", "203.0.113.1")
	require.NoError(t, err)
	require.NotContains(t, out, "nexthop", "one LB left: %s", out)
	green("lb-a gone", 3)
	require.Equal(t, 4, bridgePortCount())
	// It comes back: a new namespace, its port and nexthops again, and
	// every check, IPv6 flows through it included (they failed while its
	// new link's link-local address was tentative, before the lab turned
	// DAD off in the router namespaces).
	require.NoError(t, l.StartLB("lb-a"))
	green("lb-a back", 3)
	require.Equal(t, 5, bridgePortCount())

	// The VIPs change: the proxy's rules follow the nsp file.
	require.NoError(t, l.SetVIPs([]string{"203.0.113.2/32"}))
	require.Eventually(t, func() bool {
		out, err := l.Exec("proxy", "ip", "rule")
		return err == nil && strings.Contains(out, "from 203.0.113.2 lookup 1") && !strings.Contains(out, "203.0.113.1")
	}, time.Minute, 200*time.Millisecond, "the proxy's rules follow the VIPs")
	out, err = l.Exec("ext", "ip", "route")
	require.NoError(t, err)
	require.Contains(t, out, "203.0.113.2")
	require.NotContains(t, out, "203.0.113.1")
}
