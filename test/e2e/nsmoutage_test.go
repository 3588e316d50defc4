package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
)

// stopGrace is the grace the scenarios give a stopped component.
const stopGrace = 10 * time.Second

// requireGreen waits until every lab check passes and returns when.
func requireGreen(t *testing.T, ctx context.Context, l *labrun.Lab, within time.Duration, msg string) time.Time {
	t.Helper()
	var last note
	require.Eventually(t, func() bool {
		r, err := l.Check(ctx)
		if err != nil {
			last.set("%v", err)
			return false
		}
		var failed []string
		for _, row := range r.Failed() {
			failed = append(failed, fmt.Sprintf("%s: %s", row.Name, row.Detail))
		}
		last.set("%v", failed)
		return r.OK()
	}, within, time.Second, "%s: lab checks green (last failing: %v)", msg, &last)
	return time.Now()
}

// TestNSMOutage stops the NSM control plane (NSMgr, registry, forwarder)
// for 1 s, 30 s and 120 s, as an NSM upgrade replaces its pods, then
// starts it again. The data path does not need the control plane: traffic
// through the VIP flows during the whole outage, the proxy keeps its
// ports, routes and rules, and afterwards every check is green again
// without anyone doing anything. The traffic lost and the time to green
// are reported.
func TestNSMOutage(t *testing.T) {
	for _, outage := range []time.Duration{time.Second, 30 * time.Second, 120 * time.Second} {
		t.Run(outage.String(), func(t *testing.T) {
			l := newLab(t, nil)
			ctx, cancel := context.WithTimeout(context.Background(), outage+4*time.Minute)
			defer cancel()
			st, err := proxyState(ctx, l)
			require.NoError(t, err)
			table := st.Dataplane.Table
			before := readProxyKernel(t, l, table)
			lbsBefore := lbLinks(t, ctx, l)

			ps := startProbers(t, ctx, l, vipOf(t, l, true))
			waitProbes(t, ps, time.Time{}, 20, "probes before the outage")
			stopped := mark(ps, "nsm stopped")
			require.NoError(t, l.StopComponent("nsm", stopGrace))
			t.Logf("nsm stopped in %v", time.Since(stopped).Round(time.Millisecond))
			time.Sleep(outage)
			during := readProxyKernel(t, l, table)
			require.Equal(t, before.Ports, during.Ports, "the proxy keeps every bridge port while NSM is away")
			require.Equal(t, before.Routes, during.Routes, "and its ECMP routes")
			require.Equal(t, before.Rules, during.Rules, "and its VIP rules")
			started := mark(ps, "nsm started")
			require.NoError(t, l.StartComponent("nsm"))
			green := requireGreen(t, ctx, l, waitLong+outage, "after the NSM control plane came back")
			t.Logf("FIGURE: NSM outage of %v: all checks green %v after the control plane started again", outage,
				green.Sub(started).Round(time.Millisecond))
			// The restarted NSMgr knows no connection: that must not tear
			// one down (pkg/nsm/chain/liveness). Every connection is re-requested
			// as it is, and the same links carry it.
			back := readProxyKernel(t, l, table)
			require.Equal(t, before.Ports, back.Ports, "no target connection was replaced when NSM came back")
			require.Equal(t, before.Routes, back.Routes, "nor an LB's nexthops")
			require.Equal(t, before.Rules, back.Rules, "nor a VIP rule")
			require.Equal(t, lbsBefore, lbLinks(t, ctx, l), "the LB connections kept their links")

			// The control plane works again: a target that leaves and joins
			// gets through it.
			target := l.Targets()[0]
			require.NoError(t, l.StopTarget(target))
			require.NoError(t, l.StartTarget(target))
			requireGreen(t, ctx, l, waitLong, "a target joined through the restarted control plane")
			// The LBs re-register after the registry's return, later than
			// their registrations (15 s) would have expired: the proxy
			// waits for them rather than dropping and reconnecting them.
			require.Equal(t, lbsBefore, lbLinks(t, ctx, l), "no LB connection was dropped after NSM came back")

			waitProbes(t, ps, time.Now(), 20, "probes after the outage")
			for network, p := range ps {
				s := p.Stop()
				out := s.After(stopped).Before(started)
				back := s.After(started).Before(green)
				t.Logf("FIGURE: NSM outage of %v (%s): %d of %d probes lost during the outage, longest gap %v; %d of %d while it came back; after it: %v",
					outage, network, out.Failures(), len(out), s.After(stopped.Add(-time.Second)).LongestGap(),
					back.Failures(), len(back), s.After(started))
				requireNoCut(t, out, "%s: traffic flows while NSM is away (first error: %v)", network, out.FirstError())
				requireNoCut(t, back, "%s: and while it comes back (first error: %v)", network, back.FirstError())
			}
		})
	}
}

// lbLinks are the link indexes of the proxy's LB connections, by
// connection id.
func lbLinks(t *testing.T, ctx context.Context, l *labrun.Lab) map[string]int {
	t.Helper()
	st, err := proxyState(ctx, l)
	require.NoError(t, err)
	m := map[string]int{}
	for _, i := range st.Proxy.Interfaces {
		if i.Type.String() == "lb" {
			m[i.ConnKey] = i.Index
		}
	}
	return m
}

// TestLBDiesDuringNSMOutage: while the NSM control plane is away an LB's
// process dies; once the control plane is back the proxy drops the dead
// LB (its registration never comes back) and the other LB carries every
// flow.
func TestLBDiesDuringNSMOutage(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	lbA, lbB := l.LBs()[0], l.LBs()[1]
	aAddrs := lbAddrsOf(t, ctx, l, lbA)
	aLink := lbLinkOf(t, ctx, l, lbA)

	require.NoError(t, l.StopComponent("nsm", stopGrace))
	require.NoError(t, l.KillLB(lbA, false))
	time.Sleep(5 * time.Second)
	nh, err := lbNexthops(ctx, l)
	require.NoError(t, err)
	require.Subset(t, nh, aAddrs, "without the control plane the proxy cannot know LB-A died: it keeps it")
	started := time.Now()
	require.NoError(t, l.StartComponent("nsm"))
	dropped := waitLBGone(t, ctx, l, lbA)
	t.Logf("FIGURE: LB died during an NSM outage: its connection and nexthops dropped %v after the control plane came back (NSE expiration %v)",
		dropped.Sub(started).Round(time.Millisecond), nseExpiration)
	requireLBCarries(t, ctx, l, lbB, "after the dead LB was dropped")
	requireServed(t, ctx, l, l.Targets(), "every target serves through LB-B")
	// No forwarder removed LB-A's link (its Close never reached one): the
	// proxy deletes it before the addresses go back to the IPAM.
	h := proxyHandle(t, l)
	defer h.Close()
	require.Eventually(t, func() bool {
		_, err := h.LinkByIndex(aLink)
		return err != nil
	}, waitLong, 100*time.Millisecond, "the dead LB's link %d is removed from the proxy's namespace", aLink)
	requireNoAddressTwice(t, h)
}

// lbLinkOf is the index of the proxy's link to the LB.
func lbLinkOf(t *testing.T, ctx context.Context, l *labrun.Lab, lb string) int {
	t.Helper()
	for id, index := range lbLinks(t, ctx, l) {
		if strings.HasSuffix(id, "-"+lb) {
			return index
		}
	}
	t.Fatalf("the proxy has no link to %s", lb)
	return 0
}

// requireNoAddressTwice: no global address is on two links of the proxy's
// namespace (the IPAM hands out each one once, and the kernel must agree).
func requireNoAddressTwice(t *testing.T, h *netlink.Handle) {
	t.Helper()
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	require.NoError(t, err)
	on := map[string]int{}
	for _, a := range addrs {
		if a.IP.IsLinkLocalUnicast() || a.IP.IsLoopback() {
			continue
		}
		ip := a.IP.String()
		if prev, ok := on[ip]; ok && prev != a.LinkIndex {
			t.Fatalf("address %s is on links %d and %d", ip, prev, a.LinkIndex)
		}
		on[ip] = a.LinkIndex
	}
}

// TestShortNSEExpiration: with NSE registrations that expire after 3 s, an
// LB whose process dies is dropped, and the other LB, which keeps
// refreshing, is never dropped with it (its registration is kept by the
// registration keeper, each try bounded well below the expiration).
func TestShortNSEExpiration(t *testing.T) {
	l := newLab(t, func(o *labrun.Options) { o.NSEExpiration = 3 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lbA, lbB := l.LBs()[0], l.LBs()[1]
	aAddrs, bAddrs := lbAddrsOf(t, ctx, l, lbA), lbAddrsOf(t, ctx, l, lbB)
	require.NoError(t, l.KillLB(lbA, false))
	waitNexthopsGone(t, ctx, l, aAddrs)
	for range 20 { // 10 s: more than three expirations
		nh, err := lbNexthops(ctx, l)
		require.NoError(t, err)
		require.Subset(t, nh, bAddrs, "LB-B stays while LB-A goes")
		time.Sleep(500 * time.Millisecond)
	}
	requireLBCarries(t, ctx, l, lbB, "after LB-A's loss")
}

// TestProxyRestartDuringNSMOutage: the proxy crashes and restarts while
// the NSM control plane is away. It cannot relearn its connections, yet
// the data path keeps forwarding: the restarted proxy holds the kernel
// state it found (ports, nexthops, VIP rules) beside what it knows, and
// keeps trying to register instead of exiting. Once NSM is back its
// connections return and, NSM_LEFTOVER_HOLD later, the hold ends.
func TestProxyRestartDuringNSMOutage(t *testing.T) {
	// The hold outlasts the targets' return (they re-request a few
	// seconds after the proxy registered); one that ends first deletes
	// their links, still unclaimed, and they come back on new ones.
	l := newLab(t, func(o *labrun.Options) { o.ProxyEnv = append(o.ProxyEnv, "NSM_LEFTOVER_HOLD=10s") })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st, err := proxyState(ctx, l)
	require.NoError(t, err)
	table := st.Dataplane.Table
	before := readProxyKernel(t, l, table)
	ps := startProbers(t, ctx, l, vipOf(t, l, true))
	waitProbes(t, ps, time.Time{}, 20, "probes before the outage")
	require.NoError(t, l.StopComponent("nsm", stopGrace))

	killed := mark(ps, "proxy killed")
	require.NoError(t, l.KillProxy())
	require.NoError(t, l.StartProxyUnregistered())
	// Longer than the 15 s a proxy used to wait for the registry before
	// it exited (and its first Apply had emptied the kernel).
	time.Sleep(20 * time.Second)
	st, err = proxyState(ctx, l)
	require.NoError(t, err, "the restarted proxy runs while NSM is away")
	require.NotNil(t, st.Dataplane.Held, "and holds the kernel state it found")
	during := readProxyKernel(t, l, table)
	require.Equal(t, before.Ports, during.Ports, "every bridge port stays")
	require.Equal(t, before.Routes, during.Routes, "and the ECMP routes")
	require.Equal(t, before.Rules, during.Rules, "and the VIP rules")

	started := mark(ps, "nsm started")
	require.NoError(t, l.StartComponent("nsm"))
	requireGreen(t, ctx, l, waitLong, "after NSM came back to the restarted proxy")
	require.Eventually(t, func() bool {
		st, err := proxyState(ctx, l)
		return err == nil && st.Dataplane.Held == nil
	}, waitLong, poll, "the hold ends once the proxy has relearned its state")
	after := readProxyKernel(t, l, table)
	require.Equal(t, before.Rules, after.Rules, "the VIP rules are the relearned ones")
	require.Equal(t, len(before.Ports), len(after.Ports), "a port per connection, none left over")

	waitProbes(t, ps, time.Now(), 20, "probes after")
	for network, p := range ps {
		s := p.Stop()
		away := s.After(killed).Before(started)
		t.Logf("FIGURE: proxy restarted during an NSM outage (%s): %d of %d probes lost while NSM was away, longest gap %v; after NSM's return: %v",
			network, away.Failures(), len(away), away.LongestGap(), s.After(started))
		requireNoCut(t, away, "%s: traffic flows through the restarted proxy while NSM is away (first error: %v)", network, away.FirstError())
	}
}
