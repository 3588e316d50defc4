package ipam

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/testutil"
)

func TestSyncConduits(t *testing.T) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			open := sc.open(t)
			st := open()
			e, err := New(context.Background(), st, baseConfig())
			require.NoError(t, err)
			for _, c := range []string{"a", "b", "c"} {
				alloc(t, e, sub(IPv4, c, "w1"), "bridge")
				alloc(t, e, sub(IPv6, c, "w1"), "bridge")
			}
			e.Close()
			require.NoError(t, closeIfBolt(st))

			st = open()
			e = newEngine(t, st, baseConfig())
			// Until the server answers, nothing changes. The first list
			// drains the conduits that vanished while the IPAM was down:
			// kept, addresses renewed, nothing new.
			before := storedKeys(t, st)
			assert.Equal(t, ConduitChanges{Draining: 4}, e.SyncConduits([]string{"a", "x"}), "b and c drain in both families")
			for _, f := range []Family{IPv4, IPv6} {
				assert.False(t, e.isDraining(f, "a"))
				assert.True(t, e.isDraining(f, "b"))
				assert.True(t, e.isDraining(f, "c"))
			}
			require.NoError(t, e.Sync(context.Background()))
			assert.Equal(t, before, storedKeys(t, st), "nothing removed from the store")
			assert.Equal(t, "169.255.16.1/24", alloc(t, e, sub(IPv4, "b", "w1"), "bridge"), "an existing child is renewed")
			_, err = e.Allocate(context.Background(), sub(IPv4, "b", "w1"), "new-src")
			assert.ErrorIs(t, err, ErrDraining)

			// A conduit created by Allocate that the server never listed is kept.
			alloc(t, e, sub(IPv4, "d", "w1"), "bridge")
			assert.Equal(t, ConduitChanges{}, e.SyncConduits([]string{"a", "x"}))
			assert.False(t, e.isDraining(IPv4, "d"))
			// One that the server lists (x, before it was created) drains when dropped.
			alloc(t, e, sub(IPv4, "x", "w1"), "bridge")
			assert.Equal(t, ConduitChanges{Revived: 2}, e.SyncConduits([]string{"a", "x", "d", "b"}), "b revived in both families")
			assert.Equal(t, ConduitChanges{Draining: 4, Revived: 2}, e.SyncConduits([]string{"a", "c"}), "x, d, b drain, c revived")
			assert.True(t, e.isDraining(IPv4, "x"))
			assert.True(t, e.isDraining(IPv4, "d"))
			assert.Equal(t, "169.255.80.1/24", alloc(t, e, sub(IPv4, "new", "w1"), "bridge"), "no draining conduit's prefix is reused")
		})
	}
}

// conduits is a conduit list of the test trench, with one conduit of
// another trench (to be ignored).
func conduits(names ...string) *nspv1.ConduitResponse {
	r := testutil.ConduitList(testTrench, names...)
	r.Conduits = append(r.Conduits, &nspv1.Conduit{Name: "b", Trench: &nspv1.Trench{Name: "other"}})
	return r
}

func TestConduitWatcher(t *testing.T) {
	st := stores[1].open(t)()
	clk, cfg := gcConfig()
	e := newEngine(t, st, cfg)
	addr := map[string]string{}
	for _, c := range []string{"a", "b", "c"} {
		addr[c] = alloc(t, e, sub(IPv4, c, "w1"), "bridge")
	}
	nsp, srv := testutil.ServeFakeNSP(t, "", 3)
	client := nspv1.NewConfigurationManagerClient(srv.Dial(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := &ConduitWatcher{Client: client, Trench: testTrench, Syncer: e, MaxBackoff: 200 * time.Millisecond, Logger: quietLogger()}
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()

	// Failing server: retried, and nothing drains meanwhile.
	require.Eventually(t, func() bool { return nsp.Calls() > 3 }, 20*time.Second, 10*time.Millisecond)
	for _, c := range []string{"a", "b", "c"} {
		assert.True(t, e.hasConduit(IPv4, c))
		assert.False(t, e.isDraining(IPv4, c))
	}
	assert.Equal(t, testTrench, (<-nsp.ConduitWatches).GetTrench().GetName(), "the watch filters by trench")

	// c was created by Allocate and never listed: kept serving by the first list.
	nsp.Conduits <- conduits("a", "b")
	nsp.Conduits <- conduits("a", "b") // the second send returns once the first is applied
	assert.False(t, e.isDraining(IPv4, "c"))
	// b leaves the list (renamed for a few seconds): drained, not deleted.
	nsp.Conduits <- conduits("a", "c")
	require.Eventually(t, func() bool { return e.isDraining(IPv4, "b") }, 20*time.Second, 10*time.Millisecond)
	assert.Equal(t, addr["b"], alloc(t, e, sub(IPv4, "b", "w1"), "bridge"), "a held address is renewed")
	_, err := e.Allocate(context.Background(), sub(IPv4, "b", "w1"), "t1-src")
	assert.ErrorIs(t, err, ErrDraining)
	assert.Equal(t, "169.255.48.1/24", alloc(t, e, sub(IPv4, "d", "w1"), "bridge"), "b's subnet is not handed out")
	clk.Advance(5 * time.Second)
	// b is back: revived whole.
	nsp.Conduits <- conduits("a", "b", "c")
	require.Eventually(t, func() bool { return !e.isDraining(IPv4, "b") }, 20*time.Second, 10*time.Millisecond)
	assert.Equal(t, addr["b"], alloc(t, e, sub(IPv4, "b", "w1"), "bridge"))
	alloc(t, e, sub(IPv4, "b", "w1"), "t1-src")

	// Stream ends: the watcher reconnects and follows the new stream.
	calls := nsp.Calls()
	nsp.Conduits <- nil // the server hangs up
	require.Eventually(t, func() bool { return nsp.Calls() > calls }, 20*time.Second, 10*time.Millisecond)
	nsp.Conduits <- conduits("c")
	require.Eventually(t, func() bool { return e.isDraining(IPv4, "a") && e.isDraining(IPv4, "b") }, 20*time.Second, 10*time.Millisecond)

	// Gone for good: their allocations go when their leases end, and the
	// conduits with them; c, listed, stays (its node expired too).
	clk.Advance(11 * time.Minute)
	e.CollectGarbage()
	assert.False(t, e.hasConduit(IPv4, "a"))
	assert.False(t, e.hasConduit(IPv4, "b"))
	assert.True(t, e.hasConduit(IPv4, "c"))
	require.NoError(t, e.Sync(context.Background()))
	for _, k := range storedKeys(t, st) {
		assert.NotRegexp(t, "\x00[ab](\x00|=)", k, "conduits a and b removed from the store")
	}
	assert.Equal(t, "169.255.0.1/24", alloc(t, e, sub(IPv4, "e", "w1"), "bridge"), "a's subnet is free once nothing in it is leased")
}
