package e2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
	"github.com/causeway-net/causeway/pkg/nexthopcheck"
)

// TestLBDatapathBroken: an LB's node cut off from
// the network (everything its namespace receives is dropped; its links stay
// up, NSM notices nothing). The proxy's datapath check takes the LB's
// nexthops out of the ECMP routes and puts them back once it answers again;
// with both LBs cut off the routes keep their nexthops, and the first LB
// mended is routed over alone until the other answers too.
func TestLBDatapathBroken(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lbA, lbB := l.LBs()[0], l.LBs()[1]
	aAddrs, bAddrs := lbAddrsOf(t, ctx, l, lbA), lbAddrsOf(t, ctx, l, lbB)

	mendA := cutOff(t, l, lbA)
	broke := time.Now()
	noticed := waitNexthopsGone(t, ctx, l, aAddrs)
	t.Logf("FIGURE: LB cut off: the proxy dropped LB-A's nexthops %v after %v (NSM told nothing)", aAddrs, noticed.Sub(broke).Round(time.Millisecond))
	requireCheck(t, ctx, l, aAddrs, nexthopcheck.Down)

	// Both cut off: the routes keep both (never the last of a family).
	mendB := cutOff(t, l, lbB)
	requireCheck(t, ctx, l, append(slices.Clone(aAddrs), bAddrs...), nexthopcheck.Down)
	waitNexthops(t, ctx, l, append(slices.Clone(aAddrs), bAddrs...))

	// LB-B mended: the routes go over it alone again.
	mendB()
	requireCheck(t, ctx, l, bAddrs, nexthopcheck.Up)
	waitNexthopsGone(t, ctx, l, aAddrs)
	waitNexthops(t, ctx, l, bAddrs)

	// LB-A mended: it returns after the hold-down.
	mendA()
	mended := time.Now()
	back := waitNexthops(t, ctx, l, append(slices.Clone(aAddrs), bAddrs...))
	requireCheck(t, ctx, l, append(slices.Clone(aAddrs), bAddrs...), nexthopcheck.Up)
	t.Logf("FIGURE: LB mended: LB-A's nexthops back in the routes after %v (hold-down %v)", back.Sub(mended).Round(time.Millisecond), nexthopcheck.DefaultHoldDown)
}

// cutOff drops everything lb's namespace receives; the returned function
// mends it.
func cutOff(t *testing.T, l *labrun.Lab, lb string) func() {
	return lbPrerouting(t, l, lb, "drop")
}

// lbPrerouting puts rule first in lb's namespace's prerouting (a table of
// its own); the returned function deletes the table.
func lbPrerouting(t *testing.T, l *labrun.Lab, lb, rule string) func() {
	t.Helper()
	nft := func(rules string) {
		out, err := exec.Command("nsenter", "--net="+l.NetNSPath(lb), "nft", rules).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	nft("add table inet cutoff; add chain inet cutoff pre { type filter hook prerouting priority -300; }; add rule inet cutoff pre " + rule)
	return func() { nft("delete table inet cutoff") }
}

// TestLBDatapathLossy: 5 % random loss of everything an LB receives, for
// 30 s, takes no nexthop out of the routes.
func TestLBDatapathLossy(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lbA := l.LBs()[0]
	aAddrs := lbAddrsOf(t, ctx, l, lbA)
	requireCheck(t, ctx, l, aAddrs, nexthopcheck.Up)
	mend := lbPrerouting(t, l, lbA, "numgen random mod 100 < 5 drop")
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(poll) {
		nh, err := lbNexthops(ctx, l)
		require.NoError(t, err)
		for _, a := range aAddrs {
			require.Contains(t, nh, a, "LB-A's nexthop stays under 5 %% loss")
		}
	}
	mend()
	st, err := proxyState(ctx, l)
	require.NoError(t, err)
	var sent, lost uint64
	for _, s := range st.NexthopCheck {
		if slices.ContainsFunc(aAddrs, func(a netip.Addr) bool { return a.String() == s.Addr }) {
			require.Zero(t, s.Downs, "%s", s.Addr)
			sent, lost = sent+s.Sent, lost+s.Lost
		}
	}
	t.Logf("FIGURE: 5 %% loss on LB-A for 30 s: %d of %d probes lost over its lifetime, no withdrawal", lost, sent)
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

// requireCheck waits until the proxy's check reports every one of addrs in
// state.
func requireCheck(t *testing.T, ctx context.Context, l *labrun.Lab, addrs []netip.Addr, state nexthopcheck.State) {
	t.Helper()
	var last note
	require.Eventually(t, func() bool {
		st, err := proxyState(ctx, l)
		last.set("%+v (%v)", st.NexthopCheck, err)
		if err != nil {
			return false
		}
		for _, a := range addrs {
			if !slices.ContainsFunc(st.NexthopCheck, func(s nexthopcheck.Status) bool { return s.Addr == a.String() && s.State == state }) {
				return false
			}
		}
		return true
	}, waitLong, poll, "the check reports %v %s (last %v)", addrs, state, &last)
}
