package e2e_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// TestProxyPodReplaced replaces the proxy as Kubernetes replaces a deleted
// pod: a SIGTERM (the stopping proxy leaves its LB connections), its
// namespace deleted while the NSM control plane still holds it, and a new
// proxy under a new name in a new namespace. TCP and UDP probes to a VIP
// of each family run throughout. Traffic must come back through every
// target (within a bound far above the outage, which is reported), the
// lab's checks turn green, and the targets keep their addresses.
func TestProxyPodReplaced(t *testing.T) {
	l := newLab(t, nil)
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range l.Targets() {
				for _, cmd := range [][]string{{"ip", "rule"}, {"ip", "route", "show", "table", "all"}, {"ip", "-6", "rule"}} {
					out, _ := l.Exec(name, cmd...)
					t.Logf("%s: %v:\n%s", name, cmd, out)
				}
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	addrs := targetAddrs(l)
	ps := map[string]*traffic.Prober{}
	for _, v4 := range []bool{true, false} {
		family := map[bool]string{true: "IPv4", false: "IPv6"}[v4]
		for network, p := range startProbers(t, ctx, l, vipOf(t, l, v4)) {
			ps[family+" "+network] = p
		}
	}
	waitProbes(t, ps, time.Time{}, 20, "probes before the replacement")

	from := mark(ps, "proxy pod replaced")
	require.NoError(t, l.ReplaceProxyPod(stopGrace))
	requireServedWithin(t, ctx, l, l.Targets(), 3*time.Minute, "traffic through the new proxy's pod")
	requireGreen(t, ctx, l, waitLong, "after the proxy's pod was replaced")
	to := waitProbes(t, ps, time.Now(), 10, "probes after the replacement")
	for name, a := range addrs {
		require.ElementsMatch(t, a, l.TargetAddrs(name), "%s keeps its addresses", name)
	}
	for _, name := range slices.Sorted(maps.Keys(ps)) {
		s := ps[name].Stop().After(from).Before(to)
		t.Logf("FIGURE: proxy pod replaced in a new namespace (%s): %d of %d probes lost, longest gap %v",
			name, s.Failures(), len(s), s.LongestGap().Len().Round(time.Millisecond))
		require.False(t, s.LongestGap().Open, "%s: traffic came back", name)
	}
}
