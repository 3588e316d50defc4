package e2e_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// TestIPAMCrash is scenario 6: the IPAM is killed with SIGKILL and
// restarted: the proxy keeps forwarding meanwhile, no allocation is lost
// (the targets keep their addresses and a new target gets none of theirs),
// and the proxy catches up with what happened while the IPAM was away.
func TestIPAMCrash(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	names := l.Targets()
	addrs := targetAddrs(l)
	ps := startProbers(t, ctx, l, vipOf(t, l, true))
	waitProbes(t, ps, time.Time{}, 20, "probes before the crash")

	killed := mark(ps, "ipam killed")
	require.NoError(t, l.KillIPAM())
	// The proxy forwards while the IPAM is away, and a target leaves: its
	// release has to wait for the IPAM.
	requireServed(t, ctx, l, names, "traffic while the IPAM is down")
	// (The flows in flight to a leaving target are lost whatever the IPAM
	// does: the probes around its departure are not counted.)
	leaving := names[len(names)-1]
	leaves := mark(ps, "target leaves")
	require.NoError(t, l.StopTarget(leaving))
	requireServed(t, ctx, l, names[:len(names)-1], "traffic without the leaving target while the IPAM is down")
	left := mark(ps, "target left")
	waitProbes(t, ps, left, 20, "probes while the IPAM is down")
	restarted := mark(ps, "ipam restarted")
	require.NoError(t, l.StartIPAM())
	joining := waitProbes(t, ps, restarted, 20, "probes after the IPAM restart")
	for network, p := range ps {
		s := p.Series()
		for _, part := range []struct {
			name string
			s    traffic.Series
		}{
			{"before the target left", s.After(killed).Before(leaves)},
			{"after the target left", s.After(left).Before(restarted)},
		} {
			requireNoCut(t, part.s, "%s: no flow lost while the IPAM was down, %s (first error: %v)", network, part.name, part.s.FirstError())
		}
		t.Logf("IPAM crash (%s): target leaving while the IPAM is down: %v", network, s.After(leaves).Before(left).LongestGap())
	}

	// No allocation lost: the remaining targets keep theirs, and two new
	// targets get addresses that nobody else holds.
	newcomers := []string{"target-7", "target-8"}
	for _, n := range newcomers {
		require.NoError(t, l.StartTarget(n))
	}
	held := map[netip.Addr]string{}
	for _, name := range names[:len(names)-1] {
		require.ElementsMatch(t, addrs[name], l.TargetAddrs(name), "%s keeps its addresses", name)
		for _, p := range addrs[name] {
			held[p.Addr()] = name
		}
	}
	for _, n := range newcomers {
		var got []netip.Prefix
		require.Eventually(t, func() bool {
			got = l.TargetAddrs(n)
			return len(got) == 2
		}, waitLong, poll, "%s gets addresses from the restarted IPAM", n)
		for _, p := range got {
			owner, taken := held[p.Addr()]
			require.False(t, taken, "%s got %s, which %s holds", n, p, owner)
			held[p.Addr()] = n
		}
	}
	requireServed(t, ctx, l, append(names[:len(names)-1:len(names)-1], newcomers...), "traffic after the IPAM restart")
	// The proxy catches up: the leaving target's release, due while the
	// IPAM was away, is done once it is back. (A newcomer may already hold
	// one of those addresses: the release frees them family by family, and
	// the newcomers start as soon as the IPAM is back.)
	require.Eventually(t, func() bool {
		held, err := proxyHolds(ctx, l, addrs[leaving], newcomers...)
		return err == nil && !held
	}, waitLong, poll, "the proxy releases %s's addresses %v after the IPAM restart", leaving, addrs[leaving])
	// (Targets joining change the LBs' hashing: connections being set up
	// at that moment may break whatever the IPAM does, so only the probes
	// before the newcomers count.)
	for network, p := range ps {
		s := p.Stop().After(restarted).Before(joining)
		t.Logf("IPAM crash (%s): after the restart %v", network, s)
		requireNoCut(t, s, "%s: no flow lost after the IPAM restart (first error: %v)", network, s.FirstError())
	}
}

// TestIPAMOutageSpanningRefreshes: the IPAM stays away for many refresh
// periods of every connection (the lab's tokens live 30 s here, so the
// targets and the proxy's LB connections refresh about every 10 s). Each
// refresh is answered with the addresses the proxy holds: no connection is
// torn down, the kernel state stays as it was and no probe is lost. Before,
// the first refresh failed on the IPAM, and NSM tore down every target's
// and LB's link about one refresh period into the outage. Once the IPAM is
// back, the proxy renews the leases it owes.
func TestIPAMOutageSpanningRefreshes(t *testing.T) {
	const tokens = 30 * time.Second
	l := newLab(t, func(o *labrun.Options) { o.TokenLifetime = tokens })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := proxyState(ctx, l)
	require.NoError(t, err)
	table := st.Dataplane.Table
	before := readProxyKernel(t, l, table)
	addrs := targetAddrs(l)
	lbsBefore := lbLinks(t, ctx, l)
	ps := startProbers(t, ctx, l, vipOf(t, l, true))
	waitProbes(t, ps, time.Time{}, 20, "probes before the outage")

	stopped := mark(ps, "ipam stopped")
	require.NoError(t, l.StopComponent("ipam", stopGrace))
	time.Sleep(2 * tokens)
	during := readProxyKernel(t, l, table)
	require.Equal(t, before.Ports, during.Ports, "the proxy keeps every bridge port while the IPAM is away")
	require.Equal(t, before.Routes, during.Routes, "and its ECMP routes")
	require.Equal(t, before.Rules, during.Rules, "and its VIP rules")
	require.Equal(t, lbsBefore, lbLinks(t, ctx, l), "the LB connections keep their links")
	st, err = proxyState(ctx, l)
	require.NoError(t, err)
	t.Logf("FIGURE: IPAM away for %v: %d refreshes answered with the addresses held, %d connections owing their lease renewal",
		2*tokens, st.Proxy.Stats.RenewalsDeferred, st.Proxy.Stats.OwedRenewals)
	require.NotZero(t, st.Proxy.Stats.RenewalsDeferred, "connections refreshed while the IPAM was away")

	started := mark(ps, "ipam started")
	require.NoError(t, l.StartComponent("ipam"))
	require.Eventually(t, func() bool {
		st, err := proxyState(ctx, l)
		return err == nil && st.Proxy.Stats.OwedRenewals == 0
	}, waitLong, poll, "the owed leases are renewed once the IPAM is back")
	renewed := mark(ps, "leases renewed")
	t.Logf("FIGURE: the owed leases were renewed %v after the IPAM started again", renewed.Sub(started).Round(time.Millisecond))
	for name, a := range addrs {
		require.ElementsMatch(t, a, l.TargetAddrs(name), "%s keeps its addresses", name)
	}
	require.Equal(t, before.Ports, readProxyKernel(t, l, table).Ports, "no connection replaced after the outage")
	waitProbes(t, ps, renewed, 20, "probes after the outage")
	for network, p := range ps {
		s := p.Stop()
		out := s.After(stopped).Before(started)
		t.Logf("FIGURE: IPAM outage of %v (%s): %d of %d probes lost during it; after it: %v", 2*tokens, network,
			out.Failures(), len(out), s.After(started))
		requireNoCut(t, out, "%s: traffic flows while the IPAM is away (first error: %v)", network, out.FirstError())
		requireNoCut(t, s.After(started), "%s: and after it (first error: %v)", network, s.After(started).FirstError())
	}
}
