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

	"github.com/causeway-net/causeway/pkg/lab/labrun"
	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// lbPackets sums the packets every interface of the LB's namespace
// received, or zero when the namespace is gone.
func lbPackets(l *labrun.Lab, lb string) uint64 {
	stats, err := traffic.LinkStats(l.NetNSPath(lb))
	if err != nil {
		return 0
	}
	var n uint64
	for name, s := range stats {
		if name != "lo" {
			n += s.RxPackets
		}
	}
	return n
}

// requireLBCarries waits until a batch of flows from the external host all
// succeed and the LB forwards a share of them.
func requireLBCarries(t *testing.T, ctx context.Context, l *labrun.Lab, lb string, msg string) {
	t.Helper()
	var last note
	require.Eventually(t, func() bool {
		before := lbPackets(l, lb)
		tally, err := ingress(ctx, l, "tcp", 60, nil)
		var got uint64
		if after := lbPackets(l, lb); after > before {
			got = after - before
		}
		last.set("%d packets, %v (%v)", got, tally, err)
		// 60 connections over two LBs: a fair share is ~30 connections of
		// at least 4 packets each through the LB.
		return err == nil && tally.Errors == 0 && got >= 40
	}, waitLong, poll, "%s: %s forwards flows (last: %v)", msg, lb, &last)
}

// waitNexthopsGone waits until the proxy's effective nexthops no longer
// include any of gone, and returns when it saw that.
func waitNexthopsGone(t *testing.T, ctx context.Context, l *labrun.Lab, gone []netip.Addr) time.Time {
	t.Helper()
	return waitNexthopsUntil(t, ctx, l, fmt.Sprintf("proxy drops the nexthops %v", gone), func(nh []netip.Addr) bool {
		for _, g := range gone {
			if slices.Contains(nh, g) {
				return false
			}
		}
		return len(nh) > 0
	})
}

// waitLBGone waits until the proxy has no interface toward lb and routes
// only over the LBs it still has interfaces toward. It names the LB by its
// connection, not by its addresses: once the dead LB's addresses are
// released, the IPAM may hand them to another LB's new connection (an LB
// reselected after a control-plane outage), and they are nexthops again.
func waitLBGone(t *testing.T, ctx context.Context, l *labrun.Lab, lb string) time.Time {
	t.Helper()
	var last note
	require.Eventually(t, func() bool {
		m, err := lbNeighbors(ctx, l)
		if err != nil {
			return false
		}
		nh, err := lbNexthops(ctx, l)
		last.set("interfaces %v, nexthops %v (%v)", m, nh, err)
		if err != nil || len(nh) == 0 {
			return false
		}
		var held []netip.Addr
		for id, a := range m {
			if strings.HasSuffix(id, "-"+lb) {
				return false
			}
			held = append(held, a...)
		}
		for _, h := range nh {
			if !slices.Contains(held, h) {
				return false
			}
		}
		return true
	}, waitLong, 20*time.Millisecond, "proxy drops %s (last %v)", lb, &last)
	return time.Now()
}

// lbAddrsOf are the proxy-side neighbour addresses of the LB, i.e. the
// nexthops the proxy routes over toward it; its connection id names it.
func lbAddrsOf(t *testing.T, ctx context.Context, l *labrun.Lab, lb string) []netip.Addr {
	t.Helper()
	var addrs []netip.Addr
	require.Eventually(t, func() bool {
		m, err := lbNeighbors(ctx, l)
		if err != nil {
			return false
		}
		addrs = nil
		for id, a := range m {
			if len(id) > len(lb) && id[len(id)-len(lb)-1:] == "-"+lb {
				addrs = append(addrs, a...)
			}
		}
		return len(addrs) > 0
	}, waitLong, poll, "proxy has an interface toward %s", lb)
	return addrs
}

// TestLBLoss is scenario 3: LB-A goes away as a pod would (process killed,
// namespace deleted): once the proxy drops its nexthops every new flow goes via LB-B
// and none is black-holed after that; LB-A comes back and carries flows
// again. The gaps the probers measured are reported.
func TestLBLoss(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	vip := vipOf(t, l, true)
	lbA, lbB := l.LBs()[0], l.LBs()[1]
	requireLBCarries(t, ctx, l, lbA, "before")

	// LB-A's pod goes away.
	ps := startProbers(t, ctx, l, vip)
	waitProbes(t, ps, time.Time{}, 20, "probes before the loss")
	aAddrs := lbAddrsOf(t, ctx, l, lbA)
	extLinks := linkNames(t, l, "ext")
	killed := mark(ps, "lb-a deleted")
	require.NoError(t, l.KillLB(lbA, true))
	noticed := waitNexthopsGone(t, ctx, l, aAddrs)
	t.Logf("FIGURE: LB pod loss: proxy dropped LB-A's nexthops %v after %v", aAddrs, noticed.Sub(killed).Round(time.Millisecond))
	waitProbes(t, ps, noticed, 50, "probes after the proxy noticed")
	for network, p := range ps {
		s := p.Series()
		gap := s.After(killed.Add(-time.Second)).LongestGap()
		t.Logf("FIGURE: LB pod loss failover gap (%s): %v; probes %v", network, gap, s.After(killed))
		requireNoCut(t, s.After(noticed),
			"%s: no flow black-holed once the proxy dropped LB-A (first error: %v)", network, s.After(noticed).FirstError())
	}
	requireLBCarries(t, ctx, l, lbB, "after LB-A's loss")

	// The kernel destroys a deleted namespace's links asynchronously; LB-A's
	// link in the external host must be gone before LB-A can come back.
	require.Eventually(t, func() bool { return len(linkNames(t, l, "ext")) < len(extLinks) }, waitLong, poll,
		"LB-A's link leaves the external host (had %v)", extLinks)

	// LB-A comes back and gets flows again. The external host routes
	// through it only once it reaches targets, and the proxy forgets the
	// neighbour entry of LB-A's old MAC, so the return usually costs no
	// flow; it is reported rather than asserted flawless, because the
	// external host's route change itself may drop a datagram in flight.
	back := mark(ps, "lb-a back")
	require.NoError(t, l.StartLB(lbA))
	requireLBCarries(t, ctx, l, lbA, "after LB-A's return")
	for network, p := range ps {
		s := p.Stop().After(back)
		t.Logf("FIGURE: LB return (%s): longest gap %v; probes %v (first error: %v)", network, s.LongestGap(), s, s.FirstError())
	}
}

// TestLBProcessLoss is scenario 3's variant: only LB-A's process dies (its
// namespace and links stay, the external host stops routing over it): the
// proxy notices through NSM and drops LB-A's nexthop; the time that took and
// the probers' gaps are reported; LB-A's restart carries flows again.
func TestLBProcessLoss(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	vip := vipOf(t, l, true)
	lbA, lbB := l.LBs()[0], l.LBs()[1]
	requireLBCarries(t, ctx, l, lbA, "before")

	aAddrs := lbAddrsOf(t, ctx, l, lbA)
	ps := startProbers(t, ctx, l, vip)
	waitProbes(t, ps, time.Time{}, 20, "probes before the process loss")
	killed := mark(ps, "lb-a process killed")
	require.NoError(t, l.KillLB(lbA, false))
	noticed := waitNexthopsGone(t, ctx, l, aAddrs)
	t.Logf("FIGURE: LB process loss: proxy dropped LB-A's nexthops %v after %v (NSE expiration %v)",
		aAddrs, noticed.Sub(killed).Round(time.Millisecond), nseExpiration)
	waitProbes(t, ps, noticed, 50, "probes after the proxy noticed")
	for network, p := range ps {
		s := p.Stop()
		t.Logf("FIGURE: LB process loss failover gap (%s): %v; probes %v", network, s.After(killed.Add(-time.Second)).LongestGap(), s.After(killed))
		requireNoCut(t, s.After(noticed), "%s: no flow black-holed once the proxy noticed (first error: %v)",
			network, s.After(noticed).FirstError())
	}
	requireLBCarries(t, ctx, l, lbB, "after LB-A's process died")
	require.NoError(t, l.StartLB(lbA))
	requireLBCarries(t, ctx, l, lbA, "after LB-A's process restarted")
}

// linkNames are the interfaces of the role's namespace.
func linkNames(t *testing.T, l *labrun.Lab, role string) []string {
	t.Helper()
	stats, err := traffic.LinkStats(l.NetNSPath(role))
	require.NoError(t, err)
	var names []string
	for n := range stats {
		names = append(names, n)
	}
	return names
}
