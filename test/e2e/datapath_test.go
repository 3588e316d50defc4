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

	"github.com/causeway-net/causeway/pkg/health"
	"github.com/causeway-net/causeway/pkg/lab/labrun"
	"github.com/causeway-net/causeway/pkg/lab/traffic"
	"github.com/causeway-net/causeway/pkg/nexthopcheck"
	"github.com/causeway-net/causeway/pkg/proxyd"
)

// TestLBDatapathBroken: LB-A's datapath toward the proxy broken (`lab
// break`: its links stay up, NSM is told nothing) while a target's new VIP
// egress flows run. The proxy's datapath check takes LB-A's nexthops out of
// the ECMP routes: new flows then all leave through LB-B, and the
// readiness stays serving with a warning naming them. With both LBs broken
// the routes keep their nexthops; the first mended is routed over alone,
// and once LB-A is mended too its nexthops return, the flows spread over
// both LBs again, the warning clears and every lab check is green.
func TestLBDatapathBroken(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	lbA, lbB := l.LBs()[0], l.LBs()[1]
	aAddrs, bAddrs := lbAddrsOf(t, ctx, l, lbA), lbAddrsOf(t, ctx, l, lbB)
	all := append(slices.Clone(aAddrs), bAddrs...)
	eg := startEgressProbe(t, ctx, l)
	eg.wait(t, time.Time{}, 50, "egress flows before the break")

	broke := breakDatapath(t, l, lbA, 100)
	noticed := waitNexthopsGone(t, ctx, l, aAddrs)
	t.Logf("FIGURE: LB datapath broken: the proxy dropped LB-A's nexthops %v after %v (NSM told nothing)", aAddrs, noticed.Sub(broke).Round(time.Millisecond))
	requireCheck(t, ctx, l, aAddrs, nexthopcheck.Down)
	requireWarning(t, ctx, l, phrases("nexthop %s down", aAddrs))
	eg.wait(t, noticed, 100, "egress flows after the proxy dropped LB-A")
	s := eg.series().After(broke)
	eg.report(t, "LB datapath broken, check on", s, broke)
	requireNoCut(t, s.After(noticed), "no new flow lost once the proxy dropped LB-A (%v)", s.After(noticed))
	require.Equal(t, []string{l.ExtLinkOf(lbB)}, keys(s.After(noticed).Targets()), "new flows leave through LB-B alone")

	// Both broken: the routes keep both (never the last of a family).
	breakDatapath(t, l, lbB, 100)
	requireCheck(t, ctx, l, all, nexthopcheck.Down)
	waitNexthops(t, ctx, l, all)

	// LB-B mended: the routes go over it alone again.
	mendDatapath(t, l, lbB)
	requireCheck(t, ctx, l, bAddrs, nexthopcheck.Up)
	waitNexthopsGone(t, ctx, l, aAddrs)
	waitNexthops(t, ctx, l, bAddrs)

	// LB-A mended: it returns after the hold-down, and takes flows again.
	mendDatapath(t, l, lbA)
	mended := time.Now()
	back := waitNexthops(t, ctx, l, all)
	requireCheck(t, ctx, l, all, nexthopcheck.Up)
	t.Logf("FIGURE: LB datapath mended: LB-A's nexthops back in the routes after %v (hold-down %v)", back.Sub(mended).Round(time.Millisecond), nexthopcheck.DefaultHoldDown)
	eg.wait(t, back, 100, "egress flows after LB-A's return")
	after := eg.series().After(back)
	requireNoCut(t, after, "%v", after)
	require.Len(t, after.Targets(), 2, "new flows spread over both LBs again: %v", after.Targets())
	requireWarning(t, ctx, l, nil)
	requireGreen(t, ctx, l, waitLong, "after both LBs were mended")
}

// TestLBDatapathFlowsLost: the same failure, LB-A's datapath broken for
// 3 s while a target's new VIP egress flows run, with the datapath check on
// and off (NSM_NEXTHOP_CHECK_OFF), one lab after the other: the flows lost
// in each are reported. Off, the proxy keeps routing a share of the flows
// into LB-A for as long as the failure lasts.
func TestLBDatapathFlowsLost(t *testing.T) {
	const failure = 3 * time.Second
	lost := map[string]int{}
	for _, check := range []string{"on", "off"} {
		t.Run("check "+check, func(t *testing.T) {
			l := newLab(t, func(o *labrun.Options) {
				if check == "off" {
					o.ProxyEnv = append(o.ProxyEnv, "NSM_NEXTHOP_CHECK_OFF=true")
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			eg := startEgressProbe(t, ctx, l)
			eg.wait(t, time.Time{}, 50, "egress flows before the break")
			broke := breakDatapath(t, l, l.LBs()[0], 100)
			time.Sleep(failure)
			mendDatapath(t, l, l.LBs()[0])
			mended := time.Now()
			eg.wait(t, mended, 20, "egress flows after the mend")
			s := eg.series().After(broke).Before(mended)
			eg.report(t, fmt.Sprintf("LB datapath broken for %v, check %s", failure, check), s, broke)
			require.Positive(t, s.Failures(), "the break cost flows until something reacted")
			lost[check] = s.Failures()
		})
	}
	if lost["on"] > 0 && lost["off"] > 0 {
		t.Logf("FIGURE: new egress flows lost during a %v LB datapath failure: %d with the datapath check, %d without (%.1f×)",
			failure, lost["on"], lost["off"], float64(lost["off"])/float64(lost["on"]))
	}
}

// TestTargetDatapathBroken: with the target check on
// (NSM_TARGET_CHECK_INTERVAL), a target's datapath broken (lab break, NSM
// told nothing) is reported, by the check and as the readiness's warning,
// and nothing is taken from it: the proxy keeps its connection and
// addresses. Mended, the report clears and every check is green.
func TestTargetDatapathBroken(t *testing.T) {
	l := newLab(t, func(o *labrun.Options) { o.ProxyEnv = append(o.ProxyEnv, "NSM_TARGET_CHECK_INTERVAL=100ms") })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	target := l.Targets()[0]
	held := l.TargetAddrs(target)
	var addrs []netip.Addr
	for _, p := range held {
		addrs = append(addrs, p.Addr())
	}
	require.NotEmpty(t, addrs)
	targetCheck := func(st proxyd.DebugState) []nexthopcheck.Status { return st.TargetCheck }
	requireCheckOf(t, ctx, l, targetCheck, addrs, nexthopcheck.Up)

	broke := breakDatapath(t, l, target, 100)
	requireCheckOf(t, ctx, l, targetCheck, addrs, nexthopcheck.Down)
	t.Logf("FIGURE: target datapath broken: seen down in -debug %v later (interval 100 ms, polled every 100 ms)", time.Since(broke).Round(time.Millisecond))
	requireWarning(t, ctx, l, phrases("target %s not answering", addrs))
	holds, err := proxyHolds(ctx, l, held)
	require.NoError(t, err)
	require.True(t, holds, "the proxy keeps the target's addresses %v", held)
	nh, err := lbNexthops(ctx, l)
	require.NoError(t, err)
	require.Len(t, nh, 2*len(l.LBs()), "the LB nexthops are untouched: %v", nh)

	mendDatapath(t, l, target)
	requireCheckOf(t, ctx, l, targetCheck, addrs, nexthopcheck.Up)
	requireWarning(t, ctx, l, nil)
	requireGreen(t, ctx, l, waitLong, "after the target was mended")
}

// TestLBDatapathLossy: 5 % random loss each way on LB-A's datapath toward
// the proxy for 30 s takes no nexthop out of the routes.
func TestLBDatapathLossy(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lbA := l.LBs()[0]
	aAddrs := lbAddrsOf(t, ctx, l, lbA)
	requireCheck(t, ctx, l, aAddrs, nexthopcheck.Up)
	breakDatapath(t, l, lbA, 5)
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(poll) {
		nh, err := lbNexthops(ctx, l)
		require.NoError(t, err)
		for _, a := range aAddrs {
			require.Contains(t, nh, a, "LB-A's nexthop stays under 5 %% loss")
		}
	}
	mendDatapath(t, l, lbA)
	st, err := proxyState(ctx, l)
	require.NoError(t, err)
	var sent, lost uint64
	for _, s := range st.NexthopCheck {
		if slices.ContainsFunc(aAddrs, func(a netip.Addr) bool { return a.String() == s.Addr }) {
			require.Zero(t, s.Downs, "%s", s.Addr)
			sent, lost = sent+s.Sent, lost+s.Lost
		}
	}
	require.Positive(t, lost, "the loss applied")
	t.Logf("FIGURE: 5 %% loss each way on LB-A for 30 s: %d of %d probes lost over its lifetime, no withdrawal", lost, sent)
	requireGreen(t, ctx, l, waitLong, "after the loss ended")
}

// breakLB breaks the datapath between an LB or a target and the proxy (lab
// break) and returns when; the test's end mends it if the test did not.
func breakDatapath(t *testing.T, l *labrun.Lab, name string, lossPercent int) time.Time {
	t.Helper()
	require.NoError(t, l.Break(name, lossPercent))
	t.Cleanup(func() { _ = l.Mend(name) })
	return time.Now()
}

func mendDatapath(t *testing.T, l *labrun.Lab, name string) {
	t.Helper()
	require.NoError(t, l.Mend(name))
}

// egressProbe is a new VIP egress flow from the first target every 10 ms,
// judged by a listener on the external host.
type egressProbe struct {
	p   *traffic.EgressProber
	lis *traffic.EgressListener
}

// egressSettle is how long a datagram is given to arrive.
const egressSettle = 500 * time.Millisecond

func startEgressProbe(t *testing.T, ctx context.Context, l *labrun.Lab) *egressProbe {
	t.Helper()
	lis, err := traffic.ListenEgress(l.NetNSPath("ext"), egressPort)
	require.NoError(t, err)
	vip := vipOf(t, l, true)
	p, err := traffic.StartEgressProber(ctx, traffic.EgressFlows{NetNSPath: l.NetNSPath(l.Targets()[0]), Src: vip,
		Dst: netip.AddrPortFrom(extFor(l, vip), egressPort), Tag: "egress"}, 10*time.Millisecond)
	if err != nil {
		lis.Close()
		require.NoError(t, err)
	}
	t.Cleanup(func() { p.Stop(); lis.Close() })
	return &egressProbe{p: p, lis: lis}
}

func (e *egressProbe) series() traffic.Series { return e.p.Series(e.lis, egressSettle) }

// wait waits until n flows sent after from are judged.
func (e *egressProbe) wait(t *testing.T, from time.Time, n int, msg string) {
	t.Helper()
	require.Eventually(t, func() bool { return len(e.series().After(from)) >= n }, waitLong, poll, msg)
}

// report logs the flows lost since the break and when the last of them
// was sent.
func (e *egressProbe) report(t *testing.T, what string, s traffic.Series, broke time.Time) {
	t.Helper()
	window := "none lost"
	if last, ok := s.LastFailure(); ok {
		window = fmt.Sprintf("the last lost one sent %v after the break", last.Sub(broke).Round(time.Millisecond))
	}
	t.Logf("FIGURE: %s: %d of %d new egress flows (one every 10 ms) lost, %s", what, s.Failures(), len(s), window)
}

func keys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// requireWarning waits until the proxy's readiness serves with a Datapath
// warning made of exactly the phrases (none: no warning).
func requireWarning(t *testing.T, ctx context.Context, l *labrun.Lab, phrases []string) {
	t.Helper()
	want := slices.Sorted(slices.Values(phrases))
	var last note
	require.Eventually(t, func() bool {
		w, err := health.Probe(ctx, l.ProxyHealthSocket(), "readiness")
		last.set("%v (%v)", w, err)
		if err != nil {
			return false
		}
		if len(want) == 0 {
			return len(w) == 0
		}
		if len(w) != 1 || !strings.HasPrefix(w[0], health.Datapath+": ") {
			return false
		}
		got := strings.Split(strings.TrimPrefix(w[0], health.Datapath+": "), ", ")
		slices.Sort(got)
		return slices.Equal(got, want)
	}, waitLong, poll, "readiness serving, warning %v (last %v)", want, &last)
}

// phrases are the warning's phrases of addrs: format with each address.
func phrases(format string, addrs []netip.Addr) []string {
	var out []string
	for _, a := range addrs {
		out = append(out, fmt.Sprintf(format, a))
	}
	return out
}

// waitNexthops waits until the proxy routes over every one of want.
func waitNexthops(t *testing.T, ctx context.Context, l *labrun.Lab, want []netip.Addr) time.Time {
	t.Helper()
	return waitNexthopsUntil(t, ctx, l, fmt.Sprintf("proxy routes over %v", want), func(nh []netip.Addr) bool {
		for _, a := range want {
			if !slices.Contains(nh, a) {
				return false
			}
		}
		return true
	})
}

// waitNexthopsUntil waits until the proxy's effective nexthops satisfy ok,
// and returns when it saw that.
func waitNexthopsUntil(t *testing.T, ctx context.Context, l *labrun.Lab, what string, ok func([]netip.Addr) bool) time.Time {
	t.Helper()
	var last note
	require.Eventually(t, func() bool {
		nh, err := lbNexthops(ctx, l)
		last.set("%v (%v)", nh, err)
		return err == nil && ok(nh)
	}, waitLong, 20*time.Millisecond, "%s (last %v)", what, &last)
	return time.Now()
}

// requireCheck waits until the proxy's check of the LB nexthops reports
// every one of addrs in state.
func requireCheck(t *testing.T, ctx context.Context, l *labrun.Lab, addrs []netip.Addr, state nexthopcheck.State) {
	t.Helper()
	requireCheckOf(t, ctx, l, func(st proxyd.DebugState) []nexthopcheck.Status { return st.NexthopCheck }, addrs, state)
}

// requireCheckOf waits until the check that of picks from the proxy's
// state reports every one of addrs in state.
func requireCheckOf(t *testing.T, ctx context.Context, l *labrun.Lab, of func(proxyd.DebugState) []nexthopcheck.Status, addrs []netip.Addr, state nexthopcheck.State) {
	t.Helper()
	var last note
	require.Eventually(t, func() bool {
		st, err := proxyState(ctx, l)
		last.set("%+v (%v)", of(st), err)
		if err != nil {
			return false
		}
		for _, a := range addrs {
			if !slices.ContainsFunc(of(st), func(s nexthopcheck.Status) bool { return s.Addr == a.String() && s.State == state }) {
				return false
			}
		}
		return true
	}, waitLong, poll, "the check reports %v %s (last %v)", addrs, state, &last)
}
