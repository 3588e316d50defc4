package proxy

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/pkg/dataplane"
)

const releaseDelay = 20 * time.Second

func TestReleaseAfterDelay(t *testing.T) {
	e := newTestEnv(t)
	conn := lbConn("lb-1")
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, LBConn))
	require.NoError(t, e.p.UnsetIPContext(context.Background(), conn, LBConn))
	require.Equal(t, 1, e.p.Stats().PendingReleases)
	require.Equal(t, 0, e.p.Stats().Connections)
	// A second close while pending changes nothing.
	require.NoError(t, e.p.UnsetIPContext(context.Background(), conn, LBConn))

	// Nothing is released before the delay (one timer: the release's,
	// besides the bridge renewal's).
	require.Eventually(t, func() bool { return e.clk.Active() == 2 }, waitFor, tick)
	e.clk.Advance(releaseDelay - time.Second)
	require.Len(t, e.ipam.children(), 6)

	e.clk.Advance(time.Second)
	require.Eventually(t, func() bool { return sprint(e.ipam.children()) == "[IPV4/bridge IPV6/bridge]" }, waitFor, tick)
	require.Eventually(t, func() bool { return e.p.Stats().PendingReleases == 0 }, waitFor, tick)
	s := e.p.Stats()
	require.Equal(t, uint64(1), s.Releases)
	require.Equal(t, 2, s.Allocations)
	require.Empty(t, e.p.Snapshot().Connections)
}

func TestReconnectCancelsRelease(t *testing.T) {
	e := newTestEnv(t)
	conn := targetConn("t1")
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))
	addrs := sprint(ipcOf(conn).GetSrcIpAddrs())
	require.NoError(t, e.p.UnsetIPContext(context.Background(), conn, TargetConn))
	require.Eventually(t, func() bool { return e.clk.Active() == 2 }, waitFor, tick)

	// The target heals through another path: a new connection id, the same
	// path segment id.
	healed := targetConn("t1")
	healed.Id = "another-nse-side-id"
	healed.Context = conn.Context
	require.NoError(t, e.p.SetIPContext(context.Background(), healed, TargetConn))
	require.Equal(t, addrs, sprint(ipcOf(healed).GetSrcIpAddrs()))
	require.Eventually(t, func() bool { return e.clk.Active() == 1 }, waitFor, tick, "release timer not stopped")

	e.clk.Advance(time.Hour)
	require.Equal(t, uint64(1), e.p.Stats().ReleasesCancelled)
	require.Equal(t, 1, e.p.Stats().Connections)
	require.Equal(t, 0, e.p.Stats().PendingReleases)
	for _, c := range e.ipam.callLog() {
		require.NotContains(t, c, "Release")
	}
}

// TestReleaseRetriesAndIsCancelledByRequest: a release that keeps failing
// retries until a new request for the id stops it.
func TestReleaseRetriesAndIsCancelledByRequest(t *testing.T) {
	e := newTestEnv(t)
	conn := lbConn("lb-1")
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, LBConn))
	var mu sync.Mutex
	failing := true
	e.ipam.setHook(func(_ context.Context, m string, _ *ipamv1.Child) error {
		mu.Lock()
		defer mu.Unlock()
		if m == "Release" && failing {
			return errInjected
		}
		return nil
	})
	require.NoError(t, e.p.UnsetIPContext(context.Background(), conn, LBConn))
	require.Eventually(t, func() bool { return e.clk.Active() == 2 }, waitFor, tick)
	e.clk.Advance(releaseDelay)
	require.Eventually(t, func() bool { return e.ipam.countCalls("Release IPV4/lb-1-src") >= 3 }, waitFor, tick)

	require.NoError(t, e.p.SetIPContext(context.Background(), conn, LBConn))
	mu.Lock()
	failing = false
	mu.Unlock()
	require.Equal(t, 0, e.p.Stats().PendingReleases)
	require.Len(t, e.ipam.children(), 6)
}

// TestUnsetAndCloseDoNotBlockOnHungIPAM: with an IPAM that never answers,
// Unset returns at once and Close returns when its context ends, leaving no
// goroutine behind.
func TestUnsetAndCloseDoNotBlockOnHungIPAM(t *testing.T) {
	ipam := newFakeIPAM()
	clk := &fakeClock{}
	client := serveIPAM(t, ipam)
	p, err := New(context.Background(), Config{
		Conduit: "c", Trench: "t", Node: "n", IPAM: client, Dataplane: newFakeDataplane(),
		RetryInterval: time.Millisecond, Logger: testLogger(), Clock: clk,
	})
	require.NoError(t, err)
	conn := lbConn("lb-1")
	require.NoError(t, p.SetIPContext(context.Background(), conn, LBConn))

	hung := make(chan struct{}, 100)
	ipam.setHook(func(ctx context.Context, _ string, _ *ipamv1.Child) error {
		hung <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	require.NoError(t, p.UnsetIPContext(context.Background(), conn, LBConn))
	require.Equal(t, 1, p.Stats().PendingReleases)

	ctx, cancel := context.WithCancel(context.Background())
	closed := make(chan error, 1)
	go func() { closed <- p.Close(ctx) }()
	<-hung // Close forced the release, which is now stuck in the IPAM
	cancel()
	err = <-closed
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "1 releases not done")

	require.ErrorIs(t, p.SetIPContext(context.Background(), conn, LBConn), ErrClosed)
	require.ErrorIs(t, p.UnsetIPContext(context.Background(), conn, LBConn), ErrClosed)
	require.NoError(t, p.Close(context.Background()), "a second Close is a no-op")
}

// TestCloseForcesPendingReleasesInParallel: Close runs every pending
// release at once; the fake holds each release until all of them are in
// the IPAM together, which only happens if they run in parallel.
func TestCloseForcesPendingReleasesInParallel(t *testing.T) {
	const n = 4
	ipam := newFakeIPAM()
	p, err := New(context.Background(), Config{
		Conduit: "c", Trench: "t", Node: "n", IPAM: serveIPAM(t, ipam), Dataplane: newFakeDataplane(),
		ReleaseDelay: time.Hour, RetryInterval: time.Millisecond, Logger: testLogger(), Clock: &fakeClock{},
	})
	require.NoError(t, err)
	ids := []string{"a", "b", "c", "d"}
	for _, id := range ids {
		require.NoError(t, p.SetIPContext(context.Background(), lbConn(id), LBConn))
	}
	// One more that stays connected: Close does not release it.
	require.NoError(t, p.SetIPContext(context.Background(), targetConn("kept"), TargetConn))
	for _, id := range ids {
		require.NoError(t, p.UnsetIPContext(context.Background(), lbConn(id), LBConn))
	}
	require.Equal(t, n, p.Stats().PendingReleases)

	var mu sync.Mutex
	inside := 0
	all := make(chan struct{})
	ipam.setHook(func(ctx context.Context, m string, c *ipamv1.Child) error {
		if m != "Release" || c.GetSubnet().GetIpFamily() != ipamv1.IPFamily_IPV4 || c.GetName()[1:] != "-src" {
			return nil
		}
		mu.Lock()
		inside++
		if inside == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, p.Close(ctx))
	require.Equal(t, []string{"IPV4/bridge", "IPV4/kept-dst", "IPV4/kept-src", "IPV6/bridge", "IPV6/kept-dst", "IPV6/kept-src"},
		ipam.children())
	require.Equal(t, 0, p.Stats().PendingReleases)
}

// TestUnsetUnknownIDReleasesByName: a close for a connection the proxy
// does not know (e.g. after a restart) still releases its children.
func TestUnsetUnknownIDReleasesByName(t *testing.T) {
	e := newTestEnv(t)
	require.NoError(t, e.p.UnsetIPContext(context.Background(), lbConn("old"), LBConn))
	require.Eventually(t, func() bool { return e.clk.Active() == 2 }, waitFor, tick)
	e.clk.Advance(releaseDelay)
	require.Eventually(t, func() bool {
		return e.ipam.countCalls("Release IPV4/old-src") == 1 && e.ipam.countCalls("Release IPV6/old-dst") == 1
	}, waitFor, tick)
	require.Eventually(t, func() bool { return e.p.Stats().PendingReleases == 0 }, waitFor, tick)
}

// waitOpen blocks until gate is closed or ctx ends (a held IPAM call).
func waitOpen(ctx context.Context, gate <-chan struct{}) error {
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestUnsetSupersedesRollback: a close during a rollback turns it into a
// full release: immediate when the connection was never established,
// delayed when it holds addresses of an earlier request.
func TestUnsetSupersedesRollback(t *testing.T) {
	// One family, so that the rollback's order is known: x-src, x-dst.
	e := newTestEnv(t, func(c *Config) { c.Families = []ipamv1.IPFamily{ipamv1.IPFamily_IPV4} })
	block := make(chan struct{})
	var unblock sync.Once
	t.Cleanup(func() { unblock.Do(func() { close(block) }) }) // before Close, even on failure
	e.ipam.setHook(func(ctx context.Context, m string, c *ipamv1.Child) error {
		if m == "Allocate" && c.GetName() == "x-dst" {
			return errInjected
		}
		if m == "Release" {
			return waitOpen(ctx, block)
		}
		return nil
	})
	require.Error(t, e.p.SetIPContext(context.Background(), lbConn("x"), LBConn))
	// The rollback is stuck releasing x-src.
	require.Eventually(t, func() bool { return e.ipam.countCalls("Release IPV4/x-src") == 1 }, waitFor, tick)
	require.True(t, e.p.Snapshot().Connections[0].Rollback)
	require.NoError(t, e.p.UnsetIPContext(context.Background(), lbConn("x"), LBConn))
	snap := e.p.Snapshot()
	require.True(t, snap.Connections[0].PendingRelease)
	require.False(t, snap.Connections[0].Rollback)
	unblock.Do(func() { close(block) })
	// No clock advance needed.
	require.Eventually(t, func() bool { return sprint(e.ipam.children()) == "[IPV4/bridge]" }, waitFor, tick)
	require.Eventually(t, func() bool { return e.p.Stats().PendingReleases == 0 }, waitFor, tick)
	require.Equal(t, 2, e.ipam.countCalls("Release IPV4/x-src"), "rollback's (cancelled), then the full release's")
	require.Equal(t, 1, e.ipam.countCalls("Release IPV4/x-dst"), "the rollback never got to x-dst")
}

func TestUnsetAfterFailedRefreshIsDelayed(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.Families = []ipamv1.IPFamily{ipamv1.IPFamily_IPV4} })
	conn := lbConn("x")
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, LBConn))
	// Dual-stack is enabled for a running connection (a new proxy on the
	// same IPAM), and the new family fails: the IPv6 -src is rolled back,
	// the IPv4 addresses are kept.
	block := make(chan struct{})
	defer close(block)
	e.ipam.setHook(func(ctx context.Context, m string, c *ipamv1.Child) error {
		if m == "Allocate" && c.GetName() == "x-dst" && c.GetSubnet().GetIpFamily() == ipamv1.IPFamily_IPV6 {
			return errInjected
		}
		if m == "Release" {
			return waitOpen(ctx, block)
		}
		return nil
	})
	e.p.mu.Lock()
	e.p.cfg.Families = append(e.p.cfg.Families, ipamv1.IPFamily_IPV6)
	e.p.subnets[ipamv1.IPFamily_IPV6] = &ipamv1.Subnet{Conduit: e.p.subnets[ipamv1.IPFamily_IPV4].Conduit,
		Node: "worker-1", IpFamily: ipamv1.IPFamily_IPV6}
	e.p.mu.Unlock()
	conn.Context = nil // not carried: only the proxy's record says it existed
	require.Error(t, e.p.SetIPContext(context.Background(), conn, LBConn))
	require.Eventually(t, func() bool { return e.ipam.countCalls("Release IPV6/x-src") == 1 }, waitFor, tick)
	require.NoError(t, e.p.UnsetIPContext(context.Background(), conn, LBConn))
	require.Eventually(t, func() bool { return e.clk.Active() == 2 }, waitFor, tick, "a delayed release")
}

// leftoverLinks is the fake dataplane recording, at each Apply, the links
// it is asked to remove with the IPAM children held at that moment, and
// failing the first Applies that remove one.
type leftoverLinks struct {
	fakeDataplane
	mu       sync.Mutex
	ipam     *fakeIPAM
	failures int
	calls    []string
	held     []int // len(ipam.children()) at each call
}

func (l *leftoverLinks) Apply(s dataplane.State) error {
	l.mu.Lock()
	fail := false
	for _, r := range s.Remove {
		l.calls = append(l.calls, fmt.Sprintf("%d/%s", r.Index, r.Name))
		l.held = append(l.held, len(l.ipam.children()))
		fail = l.failures > 0
	}
	if fail {
		l.failures--
	}
	l.mu.Unlock()
	if fail {
		return errInjected
	}
	return l.fakeDataplane.Apply(s)
}

// newLinksEnv is a test proxy whose dataplane is a leftoverLinks that
// fails the first failures removals.
func newLinksEnv(t *testing.T, failures int) (*testEnv, *leftoverLinks) {
	t.Helper()
	links := &leftoverLinks{fakeDataplane: newFakeDataplane(), failures: failures}
	e := newTestEnv(t, func(c *Config) { c.Dataplane = links })
	e.dp = links.fakeDataplane
	links.ipam = e.ipam
	return e, links
}

func (l *leftoverLinks) seen() ([]string, []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls), slices.Clone(l.held)
}

// A closed connection's link that its forwarder left behind is deleted
// before its addresses go back to the IPAM (retrying a failed delete), so
// that no address is ever on a link while the IPAM hands it out again.
func TestReleaseRemovesLeftoverLinkFirst(t *testing.T) {
	e, links := newLinksEnv(t, 2)
	conn := lbConn("lb-1")
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, LBConn))
	e.p.InterfaceCreated(Interface{Index: 7, Name: "lb0", Type: LBConn, ConnKey: "lb-1"})
	// The Close withdraws the interface (the monitor forgets it) whether
	// or not the forwarder removed the link.
	e.p.InterfaceDeleted(Interface{Index: 7, Name: "lb0", Type: LBConn, ConnKey: "lb-1"})
	require.NoError(t, e.p.UnsetIPContext(context.Background(), conn, LBConn))
	require.Eventually(t, func() bool { return e.clk.Active() == 2 }, waitFor, tick)
	calls, _ := links.seen()
	require.Empty(t, calls, "nothing is removed before the release delay: the forwarder has that long")

	e.clk.Advance(releaseDelay)
	require.Eventually(t, func() bool { return sprint(e.ipam.children()) == "[IPV4/bridge IPV6/bridge]" }, waitFor, tick)
	calls, held := links.seen()
	require.Equal(t, []string{"7/lb0", "7/lb0", "7/lb0"}, calls, "two failed deletes retried, then done")
	require.Equal(t, []int{6, 6, 6}, held, "every delete came before any address was released")
}

// A connection that comes back on a new link before the delay keeps its
// addresses, and nothing is removed.
func TestRelinkedConnectionRemovesNothing(t *testing.T) {
	e, links := newLinksEnv(t, 0)
	conn := targetConn("t1")
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))
	e.p.InterfaceCreated(Interface{Index: 7, Name: "t0", Type: TargetConn, ConnKey: "t1"})
	e.p.InterfaceDeleted(Interface{Index: 7, Name: "t0", Type: TargetConn, ConnKey: "t1"})
	require.NoError(t, e.p.UnsetIPContext(context.Background(), conn, TargetConn))
	require.Eventually(t, func() bool { return e.clk.Active() == 2 }, waitFor, tick)
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))
	e.p.InterfaceCreated(Interface{Index: 9, Name: "t0", Type: TargetConn, ConnKey: "t1"})
	e.clk.Advance(time.Hour)
	require.Equal(t, uint64(1), e.p.Stats().ReleasesCancelled)
	calls, _ := links.seen()
	require.Empty(t, calls)
}

// A target that heals through another path gets a new proxy-side
// connection id under the same key; the old path's connection is closed
// later (its NSMgr's timeout, or the endpoint's expiry). That close is not
// the connection's: the healed one keeps its addresses.
func TestCloseOfSupersededConnectionKeepsAddresses(t *testing.T) {
	e := newTestEnv(t)
	old, healed := supersededPair(t, e)
	require.NoError(t, e.p.SetIPContext(context.Background(), healed, TargetConn))

	require.NoError(t, e.p.UnsetIPContext(context.Background(), old, TargetConn))
	require.Zero(t, e.p.Stats().PendingReleases, "the key is the healed connection's")
	e.clk.Advance(time.Hour)
	require.Equal(t, 1, e.p.Stats().Connections)
	for _, c := range e.ipam.callLog() {
		require.NotContains(t, c, "Release")
	}

	// The healed connection's own close releases them.
	require.NoError(t, e.p.UnsetIPContext(context.Background(), healed, TargetConn))
	require.Equal(t, 1, e.p.Stats().PendingReleases)
}

// The old path's connection may be closed while the healed connection's
// request is allocating (a refresh, say): that close is not the healed
// connection's either, and the release it scheduled goes when the healed
// request records the addresses.
func TestCloseOfSupersededConnectionDuringTheHealKeepsAddresses(t *testing.T) {
	e := newTestEnv(t)
	old, healed := supersededPair(t, e)

	entered, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.ipam.setHook(func(ctx context.Context, m string, c *ipamv1.Child) error {
		if m == "Allocate" && c.GetName() == "t1-src" && c.GetSubnet().GetIpFamily() == ipamv1.IPFamily_IPV4 {
			once.Do(func() { close(entered) })
			return waitOpen(ctx, gate)
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- e.p.SetIPContext(context.Background(), healed, TargetConn) }()
	<-entered
	require.NoError(t, e.p.UnsetIPContext(context.Background(), old, TargetConn))
	close(gate)
	require.NoError(t, <-done)

	require.Zero(t, e.p.Stats().PendingReleases, "the key is the healed connection's")
	e.clk.Advance(time.Hour)
	require.Equal(t, 1, e.p.Stats().Connections)
	for _, c := range e.ipam.callLog() {
		require.NotContains(t, c, "Release")
	}
}

// supersededPair sets up target t1's connection (old) and returns it with
// the connection of the same target healed through another path (a new
// proxy-side id, the same addresses), not yet requested.
func supersededPair(t *testing.T, e *testEnv) (old, healed *networkservice.Connection) {
	t.Helper()
	old = targetConn("t1")
	require.NoError(t, e.p.SetIPContext(context.Background(), old, TargetConn))
	healed = targetConn("t1")
	healed.Id = "another-nse-side-id"
	healed.Context = old.GetContext()
	return old, healed
}

// A connection healed onto a new link hands its old link to the dataplane
// to delete (State.Remove), in the Apply that makes the new link a port,
// once: a failed Apply hands it again, a successful one drops it.
func TestHealedConnectionRetiresReplacedLink(t *testing.T) {
	e := newTestEnv(t)
	e.link(t, lbConn("lb-1"), LBConn, 7)
	e.link(t, targetConn("t1"), TargetConn, 8)
	e.dp.waitState(t, func(s dataplaneState) bool { return sprint(indexes(s.Ports)) == "[7 8]" })
	require.Empty(t, e.dp.retired(), "a first link replaces nothing")

	e.p.InterfaceCreated(Interface{Index: 9, Name: "lb0b", Type: LBConn, ConnKey: "lb-1"})
	s := e.dp.waitState(t, func(s dataplaneState) bool { return sprint(indexes(s.Ports)) == "[8 9]" })
	require.Len(t, s.Nexthops, 2)
	require.Equal(t, []string{"7/lb-1"}, e.dp.retired(), "with the Apply that makes the new link a port")
	require.Len(t, s.Ports[1].Claims, 4, "whose port claims the connection's addresses")

	// lb-2 is announced on t1's link (taking it), then t1 heals: t1's old
	// link is lb-2's now and stays.
	e.link(t, lbConn("lb-2"), LBConn, 8)
	e.p.InterfaceCreated(Interface{Index: 10, Name: "t0b", Type: TargetConn, ConnKey: "t1"})
	e.dp.waitState(t, func(s dataplaneState) bool { return sprint(indexes(s.Ports)) == "[8 9 10]" })
	require.Equal(t, []string{"7/lb-1"}, e.dp.retired(), "a link claimed by another connection is left")

	e.dp.FailNext(1)
	e.p.InterfaceCreated(Interface{Index: 11, Name: "lb0c", Type: LBConn, ConnKey: "lb-1"})
	e.dp.waitState(t, func(s dataplaneState) bool { return sprint(indexes(s.Ports)) == "[8 10 11]" })
	require.Equal(t, []string{"7/lb-1", "9/lb0b"}, e.dp.retired(), "handed again after the failed Apply, once")
	e.p.InterfaceCreated(Interface{Index: 12, Name: "t0c", Type: TargetConn, ConnKey: "t1"})
	s = e.dp.waitState(t, func(s dataplaneState) bool { return sprint(indexes(s.Ports)) == "[8 11 12]" })
	require.Equal(t, []dataplane.LinkRef{{Index: 10, Name: "t0b"}}, s.Remove, "only what is new")
}

// A release that a re-request cancelled removes no link, even when the
// cancel comes after the release took the connection's lock (the
// re-request waits for it): the connection may be coming back on that
// very link.
func TestCancelledReleaseRemovesNoLink(t *testing.T) {
	e, links := newLinksEnv(t, 0)
	conn := lbConn("lb-1")
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, LBConn))
	e.p.InterfaceCreated(Interface{Index: 7, Name: "lb0", Type: LBConn, ConnKey: "lb-1"})
	e.p.InterfaceDeleted(Interface{Index: 7, Name: "lb0", Type: LBConn, ConnKey: "lb-1"})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.False(t, e.p.removeLeftoverLink(ctx, "lb-1", testLogger()))
	calls, _ := links.seen()
	require.Empty(t, calls)
	require.True(t, e.p.removeLeftoverLink(context.Background(), "lb-1", testLogger()))
	calls, _ = links.seen()
	require.Equal(t, []string{"7/lb0"}, calls)
}

// After Retain (the proxy stopping), a closed connection keeps its
// addresses: nothing is released, not even by Close, while a release
// pending from before is still forced.
func TestRetainKeepsAddressesOfLaterCloses(t *testing.T) {
	e := newTestEnv(t)
	early, late := lbConn("lb-early"), lbConn("lb-late")
	require.NoError(t, e.p.SetIPContext(context.Background(), early, LBConn))
	require.NoError(t, e.p.SetIPContext(context.Background(), late, LBConn))
	require.NoError(t, e.p.UnsetIPContext(context.Background(), early, LBConn))
	require.Equal(t, 1, e.p.Stats().PendingReleases)

	e.p.Retain()
	require.NoError(t, e.p.UnsetIPContext(context.Background(), late, LBConn))
	require.Equal(t, 1, e.p.Stats().PendingReleases, "no release for the close after Retain")
	require.NoError(t, e.p.Close(context.Background()))
	for _, c := range e.ipam.callLog() {
		require.NotContains(t, c, "Release IPV4/lb-late", "the late connection's addresses stay leased")
	}
	require.Contains(t, e.ipam.callLog(), "Release IPV4/lb-early-src", "the earlier release is forced")
}
