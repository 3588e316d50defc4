package e2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// ingress runs count flows of network ("tcp" or "udp") from the external
// host, spread evenly over addrs (the lab's VIPs when nil), and tallies them.
func ingress(ctx context.Context, l *labrun.Lab, network string, count int, addrs []netip.Addr) (traffic.Tally, error) {
	if addrs == nil {
		addrs = vips(l)
	}
	run := traffic.TCP
	if network == "udp" {
		run = traffic.UDP
	}
	var sum traffic.Tally
	for i, a := range addrs {
		n := count / len(addrs)
		if i < count%len(addrs) {
			n++
		}
		t, err := run(ctx, traffic.Flows{
			NetNSPath: l.NetNSPath("ext"), Addr: netip.AddrPortFrom(a, echoPort), Local: extFor(l, a), Count: n,
			Timeout: 2 * time.Second, Attempts: 3,
		})
		if err != nil {
			return sum, fmt.Errorf("%s flows to %s: %w", network, a, err)
		}
		sum.Merge(t)
	}
	return sum, nil
}

// servedBy reports whether the tally has no error and an answer from each
// of names, and from nobody else.
func servedBy(t traffic.Tally, names []string) bool {
	if t.Errors > 0 {
		return false
	}
	for _, n := range names {
		if t.Answers[n] == 0 {
			return false
		}
	}
	for n := range t.Answers {
		if !slices.Contains(names, n) {
			return false
		}
	}
	return true
}

// requireServed waits until flows from the external host to every VIP all
// succeed and are answered by exactly the named targets.
func requireServed(t *testing.T, ctx context.Context, l *labrun.Lab, names []string, msg string) {
	t.Helper()
	requireServedWithin(t, ctx, l, names, waitLong, msg)
}

// requireServedWithin is requireServed with its own bound.
func requireServedWithin(t *testing.T, ctx context.Context, l *labrun.Lab, names []string, within time.Duration, msg string) {
	t.Helper()
	var last note
	require.Eventually(t, func() bool {
		tally, err := ingress(ctx, l, "tcp", 30*len(vips(l)), nil)
		last.set("%v (%v)", tally, err)
		return err == nil && servedBy(tally, names)
	}, within, poll, "%s: want %v, last: %v", msg, names, &last)
}

// startProbers starts a TCP and a UDP prober from the external host to vip.
func startProbers(t *testing.T, ctx context.Context, l *labrun.Lab, vip netip.Addr) map[string]*traffic.Prober {
	t.Helper()
	ps := map[string]*traffic.Prober{}
	for _, network := range []string{"tcp", "udp"} {
		p, err := traffic.StartProber(ctx, traffic.ProbeConfig{
			NetNSPath: l.NetNSPath("ext"), Network: network, Addr: netip.AddrPortFrom(vip, echoPort), Local: extFor(l, vip),
			Interval: 10 * time.Millisecond, Timeout: 500 * time.Millisecond,
		})
		require.NoError(t, err)
		t.Cleanup(func() { p.Stop() })
		ps[network] = p
	}
	return ps
}

// mark records event on every prober and returns the earliest time.
func mark(ps map[string]*traffic.Prober, event string) time.Time {
	var at time.Time
	for _, p := range ps {
		if m := p.Mark(event); at.IsZero() || m.Before(at) {
			at = m
		}
	}
	return at
}

// waitProbes waits until every prober has at least n successful probes
// started after from, and returns the time the wait ended.
func waitProbes(t *testing.T, ps map[string]*traffic.Prober, from time.Time, n int, msg string) time.Time {
	t.Helper()
	for network, p := range ps {
		require.Eventually(t, func() bool {
			s := p.Series().After(from)
			return len(s)-s.Failures() >= n
		}, waitLong, poll, "%s: %s probes", msg, network)
	}
	return time.Now()
}

// extFor is the external host's client address of a's family.
func extFor(l *labrun.Lab, a netip.Addr) netip.Addr {
	for _, e := range l.ExtAddrs() {
		if e.Is4() == a.Is4() {
			return e
		}
	}
	return netip.Addr{}
}

// requireNoCut fails t when s holds a cut of the path (more than
// traffic.BlipFailures probes failed in a row, or failures to the end) and
// logs the lone probes lost in blips, which a loaded machine makes now and
// then with the path intact. msg and args say what s covers.
func requireNoCut(t *testing.T, s traffic.Series, msg string, args ...any) {
	t.Helper()
	what := fmt.Sprintf(msg, args...)
	cuts := s.Cuts()
	require.Empty(t, cuts, "%s: the path was cut: %v", what, cuts)
	if n := s.Failures(); n > 0 {
		t.Logf("%s: %d probes lost in blips (at most %d in a row, between answered ones; first error: %v)",
			what, n, traffic.BlipFailures, s.FirstError())
	}
}
