package fullmesh_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/api/pkg/api/networkservice/payload"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/checks/checkrequest"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/registryfake"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/fullmesh"
	"github.com/causeway-net/causeway/pkg/nsm/nsmtest"
)

func TestMain(m *testing.M) {
	nsmtest.Quiet()
	testutil.VerifyTestMain(m)
}

const (
	wait = 20 * time.Second
	tick = 10 * time.Millisecond
)

type harness struct {
	reg    *registryfake.Registry
	client *fakeClient
	pinner *fullmesh.Pinner
	mesh   *fullmesh.FullMesh
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, reg *registryfake.Registry, client *fakeClient, opts ...fullmesh.Option) *harness {
	t.Helper()
	h := &harness{reg: reg, client: client, pinner: fullmesh.NewPinner(), done: make(chan error, 1)}
	opts = append([]fullmesh.Option{
		fullmesh.WithPinner(h.pinner),
		fullmesh.WithRetryInterval(10 * time.Millisecond),
		fullmesh.WithWatchBackoff(10*time.Millisecond, 50*time.Millisecond),
		fullmesh.WithLabels(map[string]string{"nodeName": "node-a"}),
	}, opts...)
	h.mesh = fullmesh.New("proxy-a", "lb", client, reg, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.mesh.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	h.cancel()
	<-h.done
	h.done <- nil // let a second stop return
}

func id(nse string) string { return fullmesh.ConnectionID("proxy-a", "lb", nse) }

func (h *harness) requireOpen(t *testing.T, ids ...string) {
	t.Helper()
	if ids == nil {
		ids = []string{}
	}
	require.Eventually(t, func() bool {
		got := h.client.openIDs()
		if got == nil {
			got = []string{}
		}
		return assertEqual(got, ids)
	}, wait, tick, "open connections should become %v, are %v", ids, h.client.openIDs())
}

func assertEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestOneConnectionPerEndpoint(t *testing.T) {
	ctx := context.Background()
	reg, client := registryfake.New(), newFakeClient()
	for _, n := range []string{"lb-1", "lb-2"} {
		_, _ = reg.Register(ctx, lb(n, time.Time{}))
	}
	h := start(t, reg, client)
	h.requireOpen(t, id("lb-1"), id("lb-2"))

	_, _ = reg.Register(ctx, lb("lb-3", time.Time{}))
	h.requireOpen(t, id("lb-1"), id("lb-2"), id("lb-3"))
	// Re-registrations (refreshes) do not create more connections.
	_, _ = reg.Register(ctx, lb("lb-1", time.Now().Add(time.Hour)))
	_, _ = reg.Register(ctx, lb("lb-1", time.Now().Add(2*time.Hour)))

	require.Eventually(t, func() bool { return len(h.mesh.Connections()) == 3 }, wait, tick)
	require.Equal(t, 3, client.requestCount())
	client.mu.Lock()
	for _, r := range client.requests {
		c := r.GetConnection()
		require.Equal(t, "lb", c.GetNetworkService())
		require.Equal(t, id(c.GetNetworkServiceEndpointName()), c.GetId(), "connection id is <name>-<service>-<nse>")
		require.Equal(t, "node-a", c.GetLabels()["nodeName"])
		require.Equal(t, payload.Ethernet, c.GetPayload())
	}
	client.mu.Unlock()
	nse, ok := h.pinner.Pinned(id("lb-2"))
	require.True(t, ok)
	require.Equal(t, "lb-2", nse)

	h.stop()
	require.Empty(t, client.openIDs(), "stop closes every connection")
	for _, n := range []string{"lb-1", "lb-2", "lb-3"} {
		require.Equal(t, 1, client.closeCount(id(n)))
		_, ok := h.pinner.Pinned(id(n))
		require.False(t, ok, "closed ids are forgotten")
	}
}

// With WithLeaveOnStop a stopping mesh leaves its connections established
// (for the next run to resume): no withdraw, no Close; an endpoint that
// went away before the stop is still closed.
func TestLeaveOnStopKeepsConnections(t *testing.T) {
	ctx := context.Background()
	reg, client := registryfake.New(), newFakeClient()
	for _, n := range []string{"lb-1", "lb-2", "lb-3"} {
		_, _ = reg.Register(ctx, lb(n, time.Time{}))
	}
	withdrawn := make(chan string, 4)
	h := start(t, reg, client, fullmesh.WithLeaveOnStop(),
		fullmesh.WithWithdraw(func(c *networkservice.Connection) { withdrawn <- c.GetId() }))
	h.requireOpen(t, id("lb-1"), id("lb-2"), id("lb-3"))

	_, _ = reg.Unregister(ctx, lb("lb-3", time.Time{}))
	h.requireOpen(t, id("lb-1"), id("lb-2"))
	require.Equal(t, id("lb-3"), <-withdrawn, "an endpoint that went is withdrawn and closed")

	h.stop()
	h.requireOpen(t, id("lb-1"), id("lb-2"))
	require.Zero(t, client.closeCount(id("lb-1")))
	require.Zero(t, client.closeCount(id("lb-2")))
	require.Empty(t, withdrawn, "nothing withdrawn at the stop")
}

func TestUnregisterClosesAndReRegisterReconnects(t *testing.T) {
	ctx := context.Background()
	reg, client := registryfake.New(), newFakeClient()
	_, _ = reg.Register(ctx, lb("lb-1", time.Time{}))
	_, _ = reg.Register(ctx, lb("lb-2", time.Time{}))
	h := start(t, reg, client)
	h.requireOpen(t, id("lb-1"), id("lb-2"))

	_, _ = reg.Unregister(ctx, lb("lb-1", time.Time{}))
	h.requireOpen(t, id("lb-2"))
	require.Equal(t, 1, client.closeCount(id("lb-1")))
	require.Eventually(t, func() bool { _, ok := h.pinner.Pinned(id("lb-1")); return !ok }, wait, tick)

	_, _ = reg.Register(ctx, lb("lb-1", time.Time{}))
	h.requireOpen(t, id("lb-1"), id("lb-2"))
}

// A removed endpoint's connection leaves the data path when the mesh
// decides, not when its Close, held up behind whatever is in flight on the
// connection, returns.
func TestWithdrawComesBeforeASlowClose(t *testing.T) {
	ctx := context.Background()
	reg, client := registryfake.New(), newFakeClient()
	_, _ = reg.Register(ctx, lb("lb-1", time.Time{}))
	withdrawn := make(chan string, 4)
	h := start(t, reg, client, fullmesh.WithWithdraw(func(c *networkservice.Connection) { withdrawn <- c.GetId() }))
	h.requireOpen(t, id("lb-1"))
	slow := make(chan struct{})
	client.mu.Lock()
	client.slowShut = slow
	client.mu.Unlock()

	_, _ = reg.Unregister(ctx, lb("lb-1", time.Time{}))
	select {
	case got := <-withdrawn:
		require.Equal(t, id("lb-1"), got)
	case <-time.After(wait):
		t.Fatal("the removed endpoint's connection was never withdrawn")
	}
	require.Zero(t, client.closeCount(id("lb-1")), "withdrawn while its Close is still held up")
	close(slow)
	h.requireOpen(t)
	require.Equal(t, 1, client.closeCount(id("lb-1")))
	require.Empty(t, withdrawn, "withdrawn once")
}

// An endpoint that flaps (unregistered, registered, unregistered,
// registered again) while the Close of its first connection is held up
// never has two members at work on its connection id: the last one
// requests only once that Close is done, so the Close cannot take down the
// new connection.
func TestFlappingEndpointWaitsForTheFirstClose(t *testing.T) {
	ctx := context.Background()
	reg, client := registryfake.New(), newFakeClient()
	_, _ = reg.Register(ctx, lb("lb-1", time.Time{}))
	h := start(t, reg, client)
	h.requireOpen(t, id("lb-1"))
	slow := make(chan struct{})
	var unblock sync.Once
	t.Cleanup(func() { unblock.Do(func() { close(slow) }) }) // before the mesh's stop
	client.mu.Lock()
	client.slowShut = slow
	client.mu.Unlock()

	_, _ = reg.Unregister(ctx, lb("lb-1", time.Time{}))
	require.Eventually(t, func() bool { return client.closingCount(id("lb-1")) == 1 }, wait, tick)
	_, _ = reg.Register(ctx, lb("lb-1", time.Time{}))   // waits for the Close
	_, _ = reg.Unregister(ctx, lb("lb-1", time.Time{})) // stopped while it waits
	_, _ = reg.Register(ctx, lb("lb-1", time.Time{}))
	_, _ = reg.Register(ctx, lb("lb-2", time.Time{}))
	require.Eventually(t, func() bool { return slices.Contains(client.openIDs(), id("lb-2")) }, wait, tick,
		"the events before lb-2's are handled")
	require.Never(t, func() bool { return len(client.overlapping()) > 0 }, 300*time.Millisecond, tick,
		"a Request of the id while its Close is in flight")

	unblock.Do(func() { close(slow) })
	// The first connection is listed open until its Close ends: wait for
	// that end, then for the last member's Request.
	require.Eventually(t, func() bool { return client.closeCount(id("lb-1")) == 1 }, wait, tick)
	h.requireOpen(t, id("lb-1"), id("lb-2"))
	require.Empty(t, client.overlapping())
	require.Equal(t, 1, client.closeCount(id("lb-1")))
	_, ok := h.pinner.Pinned(id("lb-1"))
	require.True(t, ok, "the last member's pin survives the first member's end")
}

func TestExpiredRegistrationIsEvicted(t *testing.T) {
	ctx := context.Background()
	reg, client := registryfake.New(), newFakeClient()
	_, _ = reg.Register(ctx, lb("lb-short", time.Now().Add(300*time.Millisecond)))
	_, _ = reg.Register(ctx, lb("lb-long", time.Now().Add(time.Hour)))
	h := start(t, reg, client, fullmesh.WithExpiry(20*time.Millisecond, 0))
	h.requireOpen(t, id("lb-long"), id("lb-short"))

	// The registry loses lb-short without telling anyone.
	reg.LoseDelete("lb-short")
	h.requireOpen(t, id("lb-long"))
	require.Equal(t, 1, client.closeCount(id("lb-short")))
	require.Equal(t, 0, client.closeCount(id("lb-long")))
}

func TestRefreshPostponesExpiry(t *testing.T) {
	ctx := context.Background()
	reg, client := registryfake.New(), newFakeClient()
	_, _ = reg.Register(ctx, lb("lb-1", time.Now().Add(300*time.Millisecond)))
	_, _ = reg.Register(ctx, lb("lb-2", time.Now().Add(300*time.Millisecond)))
	h := start(t, reg, client, fullmesh.WithExpiry(20*time.Millisecond, 0))
	h.requireOpen(t, id("lb-1"), id("lb-2"))
	// lb-1 is refreshed, lb-2 is not.
	_, _ = reg.Register(ctx, lb("lb-1", time.Now().Add(time.Hour)))
	h.requireOpen(t, id("lb-1"))
	require.Equal(t, 0, client.closeCount(id("lb-1")))
}

func TestWatchReconnectResyncs(t *testing.T) {
	ctx := context.Background()
	reg, client := registryfake.New(), newFakeClient()
	_, _ = reg.Register(ctx, lb("lb-1", time.Time{}))
	_, _ = reg.Register(ctx, lb("lb-2", time.Time{}))
	// An endpoint missing from the listing is dropped after the relist
	// grace (its expiry is unknown here).
	h := start(t, reg, client, fullmesh.WithExpiry(20*time.Millisecond, time.Hour), fullmesh.WithRelistGrace(100*time.Millisecond))
	h.requireOpen(t, id("lb-1"), id("lb-2"))
	require.Equal(t, 1, reg.Counts().Watches)

	reg.SetDown(true)
	// While the watch is down, lb-1 goes away and lb-3 comes.
	reg.LoseDelete("lb-1")
	reg.Put(lb("lb-3", time.Time{}))
	reg.SetDown(false)

	h.requireOpen(t, id("lb-2"), id("lb-3"))
	require.GreaterOrEqual(t, reg.Counts().Watches, 2)
	require.Equal(t, 0, client.closeCount(id("lb-2")), "listed endpoints keep their connection")

	// The new watch delivers events again.
	_, _ = reg.Unregister(ctx, lb("lb-2", time.Time{}))
	h.requireOpen(t, id("lb-3"))
}

// A registry that comes back empty (restarted) fills again as the endpoints
// refresh their registrations: the mesh keeps their connections meanwhile,
// and drops only the endpoint that never comes back once its registration
// has expired.
func TestEmptyRegistryAfterReconnectFillsAgain(t *testing.T) {
	ctx := context.Background()
	reg, client := registryfake.New(), newFakeClient()
	expires := time.Now().Add(1500 * time.Millisecond)
	_, _ = reg.Register(ctx, lb("lb-1", expires))
	_, _ = reg.Register(ctx, lb("lb-2", expires))
	h := start(t, reg, client, fullmesh.WithExpiry(20*time.Millisecond, time.Hour))
	h.requireOpen(t, id("lb-1"), id("lb-2"))
	require.True(t, h.mesh.Listed("lb-1"))
	require.False(t, h.mesh.Listed("lb-9"), "not a member")

	reg.SetDown(true)
	reg.Forget()
	reg.SetDown(false)
	require.Eventually(t, func() bool { return reg.Counts().Watches >= 2 }, time.Minute, 10*time.Millisecond, "the watch reconnects")
	require.Eventually(t, func() bool { return !h.mesh.Listed("lb-1") && !h.mesh.Listed("lb-2") }, time.Minute, 10*time.Millisecond,
		"kept, but not listed, while they may register again")
	h.requireOpen(t, id("lb-1"), id("lb-2"))

	// lb-1 refreshes its registration in the new registry; lb-2 is dead.
	_, _ = reg.Register(ctx, lb("lb-1", time.Now().Add(time.Hour)))
	h.requireOpen(t, id("lb-1"))
	require.True(t, h.mesh.Listed("lb-1"), "listed again")
	require.False(t, h.mesh.Listed("lb-2"), "removed")
	require.Equal(t, 0, client.closeCount(id("lb-1")), "the endpoint that came back kept its connection")
	require.Equal(t, 1, client.closeCount(id("lb-2")), "the one that did not is closed after its expiry")
}

// A registry away for longer than a registration lasts comes back after
// every expiry has passed, while the live endpoints are still retrying to
// register: the mesh gives each a registration lifetime from the
// registry's return, and drops only the one that never comes back.
func TestRegistryBackAfterExpiryKeepsReregisteringEndpoints(t *testing.T) {
	ctx := context.Background()
	reg, client := registryfake.New(), newFakeClient()
	const lifetime = time.Second
	_, _ = reg.Register(ctx, lb("lb-1", time.Now().Add(lifetime)))
	_, _ = reg.Register(ctx, lb("lb-2", time.Now().Add(lifetime)))
	h := start(t, reg, client, fullmesh.WithExpiry(20*time.Millisecond, time.Hour))
	h.requireOpen(t, id("lb-1"), id("lb-2"))

	reg.SetDown(true)
	reg.LoseDelete("lb-1")
	reg.LoseDelete("lb-2")
	time.Sleep(lifetime + 500*time.Millisecond) // both registrations have expired
	reg.SetDown(false)
	require.Eventually(t, func() bool { return reg.Counts().Watches >= 2 }, time.Minute, 10*time.Millisecond, "the watch reconnects")
	time.Sleep(200 * time.Millisecond) // ten expiry checks pass
	require.Equal(t, 0, client.closeCount(id("lb-1")), "an endpoint is not dropped while it may still register again")
	require.Equal(t, 0, client.closeCount(id("lb-2")), "an endpoint is not dropped while it may still register again")

	_, _ = reg.Register(ctx, lb("lb-1", time.Now().Add(lifetime)))
	h.requireOpen(t, id("lb-1"))
	require.Equal(t, 0, client.closeCount(id("lb-1")), "the endpoint that came back kept its connection")
	require.Equal(t, 1, client.closeCount(id("lb-2")), "the one that did not is closed a lifetime after the return")
}

func TestFailedRequestsAreRetried(t *testing.T) {
	ctx := context.Background()
	reg, client := registryfake.New(), newFakeClient()
	client.failures = 3
	_, _ = reg.Register(ctx, lb("lb-1", time.Time{}))
	h := start(t, reg, client)
	h.requireOpen(t, id("lb-1"))
	require.Equal(t, 4, client.requestCount())
}

func TestDeleteDuringRequestClosesAfterwards(t *testing.T) {
	ctx := context.Background()
	reg, client := registryfake.New(), newFakeClient()
	gate := make(chan struct{})
	client.gate = gate
	_, _ = reg.Register(ctx, lb("lb-1", time.Time{}))
	h := start(t, reg, client)
	// Wait until the member is blocked in Request, then unregister.
	require.Eventually(t, func() bool { _, ok := h.pinner.Pinned(id("lb-1")); return ok }, wait, tick)
	_, _ = reg.Unregister(ctx, lb("lb-1", time.Time{}))
	close(gate)
	require.Eventually(t, func() bool { return client.closeCount(id("lb-1")) == 1 }, wait, tick)
	h.requireOpen(t)
}

func TestPinnerRestoresEndpointName(t *testing.T) {
	p := fullmesh.NewPinner()
	reg, client := registryfake.New(), newFakeClient()
	_, _ = reg.Register(context.Background(), lb("lb-1", time.Time{}))
	h := start(t, reg, client, fullmesh.WithPinner(p))
	h.requireOpen(t, id("lb-1"))

	cli := chain.NewNetworkServiceClient(p, checkrequest.NewClient(t, func(t *testing.T, r *networkservice.NetworkServiceRequest) {
		require.Equal(t, "lb-1", r.GetConnection().GetNetworkServiceEndpointName())
	}))
	// As after a heal with reselect: the endpoint name was cleared.
	_, err := cli.Request(context.Background(), &networkservice.NetworkServiceRequest{
		Connection: &networkservice.Connection{Id: id("lb-1"), State: networkservice.State_RESELECT_REQUESTED},
	})
	require.NoError(t, err)
}
