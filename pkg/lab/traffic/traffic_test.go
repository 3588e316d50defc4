package traffic_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/lab/impair"
	"github.com/causeway-net/causeway/pkg/lab/topo"
	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

var vip = netip.MustParseAddr("10.9.0.1")

// twoTargets builds cli -> {s1, s2}: each server carries the VIP on lo and
// answers with its name; cli routes the VIP over both with per-flow hashing.
func twoTargets(t *testing.T) (cli, s1, s2 *testutil.NetNS) {
	cli = testutil.NewNetNS(t, "tcli")
	s1 = testutil.NewNetNS(t, "ts1")
	s2 = testutil.NewNetNS(t, "ts2")
	require.NoError(t, topo.ApplySysctls(cli.Path(), topo.RouterSysctls))
	var gws []netip.Addr
	for i, s := range []*testutil.NetNS{s1, s2} {
		near := netip.MustParsePrefix(fmt.Sprintf("10.%d.0.1/24", i+1))
		far := netip.MustParsePrefix(fmt.Sprintf("10.%d.0.2/24", i+1))
		require.NoError(t, topo.AddVeth(
			topo.VethEnd{NetNSPath: cli.Path(), Name: fmt.Sprintf("s%d", i+1), Addrs: []netip.Prefix{near}},
			topo.VethEnd{NetNSPath: s.Path(), Name: "c0", Addrs: []netip.Prefix{far}}))
		s.MustExec(t, "ip", "addr", "add", vip.String()+"/32", "dev", "lo")
		startEcho(t, s.Path(), fmt.Sprintf("srv-%d", i+1), vip, 5000)
		gws = append(gws, far.Addr())
	}
	require.NoError(t, topo.AddRoute(cli.Path(), netip.PrefixFrom(vip, 32), gws...))
	return cli, s1, s2
}

func TestFlowsTally(t *testing.T) {
	cli, _, _ := twoTargets(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, run := range []func(context.Context, traffic.Flows) (traffic.Tally, error){traffic.TCP, traffic.UDP} {
		tally, err := run(ctx, traffic.Flows{NetNSPath: cli.Path(), Addr: netip.AddrPortFrom(vip, 5000), Count: 100, Attempts: 3})
		require.NoError(t, err)
		t.Log(tally)
		require.Equal(t, 100, tally.Total)
		require.Zero(t, tally.Errors, tally.String())
		// Per-flow hashing over two paths: each serves a fair share.
		require.Greater(t, tally.Share("srv-1"), 0.15, tally.String())
		require.Greater(t, tally.Share("srv-2"), 0.15, tally.String())
		require.Equal(t, 100, tally.Answers["srv-1"]+tally.Answers["srv-2"])
	}

	var sum traffic.Tally
	sum.Merge(traffic.Tally{Total: 3, Errors: 1, Answers: map[string]int{"a": 2}})
	sum.Merge(traffic.Tally{Total: 2, Answers: map[string]int{"a": 1, "b": 1}})
	require.Equal(t, traffic.Tally{Total: 5, Errors: 1, Answers: map[string]int{"a": 3, "b": 1}}, sum)
	require.InDelta(t, 0.6, sum.Share("a"), 1e-9)

	// Nothing listens on 5001: every flow fails and is counted.
	for _, run := range []func(context.Context, traffic.Flows) (traffic.Tally, error){traffic.TCP, traffic.UDP} {
		tally, err := run(ctx, traffic.Flows{NetNSPath: cli.Path(), Addr: netip.AddrPortFrom(vip, 5001), Count: 10, Timeout: 300 * time.Millisecond})
		require.NoError(t, err)
		require.Equal(t, 10, tally.Errors, tally.String())
		require.Zero(t, tally.OK())
		require.NotEmpty(t, tally.Examples)
	}
	_, err := traffic.TCP(ctx, traffic.Flows{NetNSPath: cli.Path(), Count: 1})
	require.Error(t, err, "no address")
}

func TestProberMeasuresGap(t *testing.T) {
	cli, s1, _ := twoTargets(t)
	// One path only, so that breaking it breaks every flow.
	require.NoError(t, topo.AddRoute(cli.Path(), netip.PrefixFrom(vip, 32), netip.MustParseAddr("10.1.0.2")))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const timeout = 300 * time.Millisecond
	var probers []*traffic.Prober
	for _, network := range []string{"tcp", "udp"} {
		p, err := traffic.StartProber(ctx, traffic.ProbeConfig{
			NetNSPath: cli.Path(), Network: network, Addr: netip.AddrPortFrom(vip, 5000),
			Interval: 5 * time.Millisecond, Timeout: timeout,
		})
		require.NoError(t, err)
		probers = append(probers, p)
		defer p.Stop()
	}
	waitFor := func(cond func(traffic.Series) bool, msg string) {
		for _, p := range probers {
			require.Eventually(t, func() bool { return cond(p.Series()) }, 30*time.Second, 20*time.Millisecond, msg)
		}
	}
	// Ready once the last 20 probes succeeded: a probe that timed out while
	// the machine was busy starting up is not the outage under test.
	waitFor(func(s traffic.Series) bool { return len(s) >= 20 && s[len(s)-20:].Failures() == 0 }, "probes succeed")
	ready := time.Now()

	// The server loses the VIP: probes are dropped until it is back.
	var down, up time.Time
	for _, p := range probers {
		down = p.Mark("down")
	}
	down = earliest(probers, "down")
	s1.MustExec(t, "ip", "addr", "del", vip.String()+"/32", "dev", "lo")
	waitFor(func(s traffic.Series) bool { return s.After(down).Failures() >= 10 }, "probes fail while the VIP is gone")
	for _, p := range probers {
		p.Mark("up")
	}
	up = latest(probers, "up")
	s1.MustExec(t, "ip", "addr", "add", vip.String()+"/32", "dev", "lo")
	waitFor(func(s traffic.Series) bool {
		first, ok := s.FirstOKAfter(up)
		return ok && len(s.After(first)) >= 10
	}, "probes succeed again")

	for _, p := range probers {
		s := p.Stop()
		t.Log(s)
		at, ok := p.MarkAt("down")
		require.True(t, ok)
		require.False(t, at.Before(down))
		gap := s.LongestGap()
		require.False(t, gap.Open)
		require.Greater(t, gap.Failures, 10)
		// The gap spans the outage: from about "down" to after "up".
		require.True(t, gap.Start.After(down.Add(-timeout)), "gap starts at the outage")
		require.False(t, gap.End.Before(up), "gap ends after the VIP is back")
		require.GreaterOrEqual(t, gap.Len(), up.Sub(down)-timeout)
		require.Zero(t, s.After(ready).Before(down.Add(-timeout)).Failures())
		require.Zero(t, s.After(gap.End).Failures())
		require.Equal(t, len(s)-s.Failures(), s.Targets()["srv-1"])
	}
	_, err := traffic.StartProber(ctx, traffic.ProbeConfig{Network: "sctp", Addr: netip.AddrPortFrom(vip, 1)})
	require.Error(t, err)
}

// egressBed is a client namespace with source addresses on lo, routing to
// the server's addresses over two links, via-a and via-b (in-via-a and
// in-via-b in the server).
type egressBed struct {
	cli, srv   *testutil.NetNS
	src4, src6 netip.Addr
	dst4, dst6 netip.Addr
}

func newEgressBed(t *testing.T) egressBed {
	cli := testutil.NewNetNS(t, "ecli")
	srv := testutil.NewNetNS(t, "esrv")
	require.NoError(t, topo.ApplySysctls(cli.Path(), topo.RouterSysctls))
	dst4, dst6 := netip.MustParseAddr("10.8.0.1"), netip.MustParseAddr("fd00:8::1")
	src4, src6 := netip.MustParseAddr("10.9.9.9"), netip.MustParseAddr("fd00:9::9")
	var gw4, gw6 []netip.Addr
	for i, name := range []string{"via-a", "via-b"} {
		require.NoError(t, topo.AddVeth(
			topo.VethEnd{NetNSPath: cli.Path(), Name: name, Addrs: []netip.Prefix{
				netip.MustParsePrefix(fmt.Sprintf("10.%d.0.1/24", i+1)), netip.MustParsePrefix(fmt.Sprintf("fd00:%d::1/64", i+1))}},
			topo.VethEnd{NetNSPath: srv.Path(), Name: "in-" + name, Addrs: []netip.Prefix{
				netip.MustParsePrefix(fmt.Sprintf("10.%d.0.2/24", i+1)), netip.MustParsePrefix(fmt.Sprintf("fd00:%d::2/64", i+1))}}))
		gw4 = append(gw4, netip.MustParseAddr(fmt.Sprintf("10.%d.0.2", i+1)))
		gw6 = append(gw6, netip.MustParseAddr(fmt.Sprintf("fd00:%d::2", i+1)))
	}
	cli.MustExec(t, "ip", "addr", "add", src4.String()+"/32", "dev", "lo")
	cli.MustExec(t, "ip", "addr", "add", src6.String()+"/128", "dev", "lo")
	srv.MustExec(t, "ip", "addr", "add", dst4.String()+"/32", "dev", "lo")
	srv.MustExec(t, "ip", "addr", "add", dst6.String()+"/128", "dev", "lo", "nodad")
	require.NoError(t, topo.AddRoute(cli.Path(), netip.PrefixFrom(dst4, 32), gw4...))
	require.NoError(t, topo.AddRoute(cli.Path(), netip.PrefixFrom(dst6, 128), gw6...))
	return egressBed{cli: cli, srv: srv, src4: src4, src6: src6, dst4: dst4, dst6: dst6}
}

func TestEgressArrivesPerLink(t *testing.T) {
	b := newEgressBed(t)
	cli, srv, src4, src6, dst4, dst6 := b.cli, b.srv, b.src4, b.src6, b.dst4, b.dst6
	l, err := traffic.ListenEgress(srv.Path(), 6000)
	require.NoError(t, err)
	defer l.Close()
	before, err := traffic.LinkStats(srv.Path())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Every flow is a datagram of its own: one lost on a busy machine is
	// sent again as a new flow (DeliverEgress), so that the count is of
	// what the routes carried, not of what the machine had time for.
	const perFamily = 64
	sent := 0
	for _, f := range []traffic.EgressFlows{
		{NetNSPath: cli.Path(), Src: src4, Dst: netip.AddrPortFrom(dst4, 6000), Count: perFamily, Tag: "v4"},
		{NetNSPath: cli.Path(), Src: src6, Dst: netip.AddrPortFrom(dst6, 6000), Count: perFamily, Tag: "v6"},
	} {
		n, err := traffic.DeliverEgress(ctx, l, f, time.Second)
		require.NoError(t, err, "%d %s datagrams arrive: %v", perFamily, f.Tag, l.ByIface(f.Tag))
		require.GreaterOrEqual(t, n, perFamily)
		sent += n
	}
	arrivals := l.Arrivals()
	t.Logf("FIGURE: egress flows sent %d, arrived %d (%d of %d sent again)", sent, len(arrivals), sent-2*perFamily, sent)
	for _, a := range arrivals {
		want := src4
		if a.Tag == "v6" {
			want = src6
		}
		require.Equal(t, want, a.Src.Addr(), "source kept: %+v", a)
	}
	for _, tag := range []string{"v4", "v6"} {
		by := l.ByIface(tag)
		t.Log(tag, by)
		require.Len(t, by, 2, "flows arrive on both links: %v", by)
		require.GreaterOrEqual(t, by["in-via-a"]+by["in-via-b"], perFamily)
	}
	after, err := traffic.LinkStats(srv.Path())
	require.NoError(t, err)
	d := traffic.Delta(before, after)
	require.GreaterOrEqual(t, d["in-via-a"].RxPackets+d["in-via-b"].RxPackets, uint64(len(arrivals)))

	_, err = traffic.SendEgress(ctx, traffic.EgressFlows{Dst: netip.AddrPortFrom(dst4, 1), Count: 1})
	require.Error(t, err)
}

// An egress prober's flows that a broken link drops are judged lost, the
// others arrived, with the link they came in on.
func TestEgressProberJudgesArrivals(t *testing.T) {
	b := newEgressBed(t)
	l, err := traffic.ListenEgress(b.srv.Path(), 6000)
	require.NoError(t, err)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := traffic.StartEgressProber(ctx, traffic.EgressFlows{NetNSPath: b.cli.Path(), Src: b.src4,
		Dst: netip.AddrPortFrom(b.dst4, 6000), Tag: "p"}, 5*time.Millisecond)
	require.NoError(t, err)
	defer p.Stop()
	const settle = 200 * time.Millisecond
	enough := func(from time.Time) func() bool {
		return func() bool { return len(p.Series(l, settle).After(from)) >= 60 }
	}
	require.Eventually(t, enough(time.Time{}), 20*time.Second, 20*time.Millisecond)
	s := p.Series(l, settle)
	require.Zero(t, s.Failures(), "%v", s)
	require.Len(t, s.Targets(), 2, "both links: %v", s.Targets())
	// Series catches the readers up through markers over loopback, which
	// are not arrivals.
	_, err = l.Sync(time.Second)
	require.NoError(t, err)
	for _, a := range l.Arrivals() {
		require.True(t, strings.HasPrefix(a.Tag, "p#"), "only the prober's datagrams arrive: %q", a.Tag)
	}

	require.NoError(t, impair.Break(b.srv.Path(), impair.Impairment{Keep: []string{"lo", "in-via-b"}}))
	broke := time.Now()
	require.Eventually(t, enough(broke), 20*time.Second, 20*time.Millisecond)
	s = p.Series(l, settle).After(broke)
	require.Positive(t, s.Failures(), "flows over via-a are lost: %v", s)
	require.Equal(t, map[string]int{"in-via-b": len(s) - s.Failures()}, s.Targets(), "the others arrive over via-b")
	require.ErrorIs(t, s.FirstError(), traffic.ErrNotArrived)
}

func earliest(ps []*traffic.Prober, event string) time.Time {
	var at time.Time
	for _, p := range ps {
		if m, _ := p.MarkAt(event); at.IsZero() || m.Before(at) {
			at = m
		}
	}
	return at
}

func latest(ps []*traffic.Prober, event string) time.Time {
	var at time.Time
	for _, p := range ps {
		if m, _ := p.MarkAt(event); m.After(at) {
			at = m
		}
	}
	return at
}

// TestAskUDPNewSkipsTrackedPorts: a flow is sent from a source port that
// the conntrack check does not report, each port tried once; when every
// port tried is reported, nothing is sent and the error says so.
func TestAskUDPNewSkipsTrackedPorts(t *testing.T) {
	cli, _, _ := twoTargets(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := netip.AddrPortFrom(vip, 5000)
	var asked []uint16
	tracked := func(from netip.AddrPort) (bool, error) {
		asked = append(asked, from.Port())
		return len(asked) <= 2, nil
	}
	name, err := traffic.AskUDPNew(ctx, cli.Path(), addr, 5*time.Second, tracked)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(name, "s"), "a target answered: %q", name)
	require.Len(t, asked, 3, "two tracked ports skipped")
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(asked))), 3, "each port tried once: %v", asked)

	_, err = traffic.AskUDPNew(ctx, cli.Path(), addr, 5*time.Second, func(netip.AddrPort) (bool, error) { return true, nil })
	require.ErrorContains(t, err, "still holds a flow from each of the 8 source ports tried")
}

func TestThroughput(t *testing.T) {
	cli, _, _ := twoTargets(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bps, err := traffic.Throughput(ctx, cli.Path(), netip.Addr{}, netip.AddrPortFrom(vip, 5000), 300*time.Millisecond)
	require.NoError(t, err)
	t.Logf("%.0f MB/s echoed", bps/1e6)
	require.Greater(t, bps, 0.0)
	_, err = traffic.Throughput(ctx, cli.Path(), netip.Addr{}, netip.AddrPortFrom(vip, 5001), 100*time.Millisecond)
	require.Error(t, err, "nothing listens")
}
