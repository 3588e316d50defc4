package e2e_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
			require.Zero(t, part.s.Failures(), "%s: no flow lost while the IPAM was down, %s (first error: %v)", network, part.name, part.s.FirstError())
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
		require.Zero(t, s.Failures(), "%s: no flow lost after the IPAM restart (first error: %v)", network, s.FirstError())
	}
}
