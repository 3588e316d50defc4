package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
)

// logHas reports whether the component's log has a line with every one of
// words.
func logHas(l *labrun.Lab, component string, words ...string) bool {
	for _, line := range strings.Split(logOf(l, component), "\n") {
		all := true
		for _, w := range words {
			if !strings.Contains(line, w) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// TestBadVIP is scenario 8, first case: an invalid VIP in the
// configuration file is reported by the configuration server, which keeps
// serving the last good configuration: the proxy's rules and the traffic
// are unchanged.
func TestBadVIP(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := proxyState(ctx, l)
	require.NoError(t, err)
	before := readProxyKernel(t, l, st.Dataplane.Table)

	y := "trenches: [{name: trench-a}]\nconduits:\n  - {name: load-balancer, trench: trench-a}\nvips:\n"
	for i, v := range l.VIPs() {
		y += fmt.Sprintf("  - {name: vip-%d, address: %s, trench: trench-a}\n", i+1, v)
	}
	y += "  - {name: bad, address: 300.1.2.3/32, trench: trench-a}\n"
	require.NoError(t, l.WriteRawNSPConfig(y))
	require.Eventually(t, func() bool { return logHas(l, "nsp", "300.1.2.3") }, waitLong, poll,
		"the configuration server reports the invalid VIP")
	t.Logf("nsp reports: %s", lineWith(logOf(l, "nsp"), "300.1.2.3"))

	requireServed(t, ctx, l, l.Targets(), "traffic with a broken configuration file")
	after := readProxyKernel(t, l, st.Dataplane.Table)
	require.Equal(t, before.Rules, after.Rules, "the proxy keeps the last good VIPs")
	require.True(t, l.Running("nsp"), "the configuration server keeps running")
}

// TestUnknownService is scenario 8, second case: a target asking for a
// network service that does not exist gets no connection and the NSM side
// says why; the other targets keep working.
func TestUnknownService(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	names := l.Targets()
	const service = "proxy.no-such-conduit.trench-a.lab"
	require.NoError(t, l.StartTargetService("target-x", service))
	require.Eventually(t, func() bool {
		return logHas(l, "target-x", service) || logHas(l, "nsm", service)
	}, waitLong, poll, "a log names the missing service %s", service)
	for _, c := range []string{"target-x", "nsm"} {
		if line := lineWith(logOf(l, c), service); line != "" {
			t.Logf("%s reports: %s", c, line)
		}
	}
	require.Empty(t, l.TargetAddrs("target-x"), "no addresses for a target of an unknown service")
	requireServed(t, ctx, l, names, "the other targets keep working")
}

// TestIPAMPoolTooSmall is scenario 8, third case: the IPAM's IPv4 pool
// holds fewer addresses than the LBs and targets need: the proxy reports
// the exhausted pool, the targets that got addresses work.
func TestIPAMPoolTooSmall(t *testing.T) {
	// A /26 pool of /27 conduits of /28 nodes: 14 usable addresses in the
	// node; the bridge takes one, each LB connection two, each target one:
	// 8 targets cannot all fit.
	l := startLab(t, func(o *labrun.Options) {
		o.Targets = 8
		o.IPAMPrefixIPv4 = "172.30.0.0/26"
		o.IPAMEnv = []string{"IPAM_CONDUIT_PREFIX_LENGTH_IPV4=27", "IPAM_NODE_PREFIX_LENGTH_IPV4=28"}
	}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The IPAM's error is "no free prefix" (gRPC ResourceExhausted).
	const exhausted = "no free prefix"
	require.Eventually(t, func() bool {
		return logHas(l, "proxy", exhausted) || logHas(l, "ipam", exhausted)
	}, waitLong, poll, "the proxy or the IPAM reports the exhausted pool")
	for _, c := range []string{"proxy", "ipam"} {
		if line := lineWith(logOf(l, c), exhausted); line != "" {
			t.Logf("%s reports: %s", c, line)
		}
	}
	// The targets left without addresses keep asking, and one that gives
	// up frees its addresses for another: which targets hold addresses
	// changes. Every flow must still succeed and land on a target that
	// holds addresses, and some target must be left without.
	split := func() (served, starved []string) {
		for _, name := range l.Targets() {
			if len(l.TargetAddrs(name)) > 0 {
				served = append(served, name)
			} else {
				starved = append(starved, name)
			}
		}
		return served, starved
	}
	var last note
	require.Eventually(t, func() bool {
		served, starved := split()
		tally, err := ingress(ctx, l, "tcp", 30*len(vips(l)), nil)
		servedAfter, _ := split()
		last.set("with addresses %v, without %v: %v (%v)", served, starved, tally, err)
		if err != nil || tally.Errors > 0 || tally.OK() == 0 || len(starved) == 0 {
			return false
		}
		for name := range tally.Answers {
			if !slices.Contains(served, name) && !slices.Contains(servedAfter, name) {
				return false
			}
		}
		return true
	}, waitLong, poll, "the targets that got addresses work, some have none: %v", &last)
	t.Logf("pool too small: %v", &last)
}

// lineWith is the first line of s containing word.
func lineWith(s, word string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, word) {
			return line
		}
	}
	return ""
}
