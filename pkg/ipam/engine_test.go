package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
)

func TestCarvingFirstFit(t *testing.T) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			e := newEngine(t, sc.open(t)(), baseConfig())
			// IPv4: conduit /20, node /24, never the node's first address.
			assert.Equal(t, "169.255.0.1/24", alloc(t, e, sub(IPv4, "c1", "w1"), "bridge"))
			assert.Equal(t, "169.255.0.2/24", alloc(t, e, sub(IPv4, "c1", "w1"), "p1-src"))
			assert.Equal(t, "169.255.1.1/24", alloc(t, e, sub(IPv4, "c1", "w2"), "bridge"))
			assert.Equal(t, "169.255.16.1/24", alloc(t, e, sub(IPv4, "c2", "w1"), "bridge"))
			assert.Equal(t, "169.255.2.1/24", alloc(t, e, sub(IPv4, "c1", ""), "bridge"), "empty node name is a node")
			assert.Equal(t, "169.255.2.2/24", alloc(t, e, sub(IPv4, "c1", ""), "nsc:4f2a/load-balancer.c1@x-dst"), "any visible ASCII")
			// IPv6: conduit /56, node /64.
			assert.Equal(t, "fd00::1/64", alloc(t, e, sub(IPv6, "c1", "w1"), "bridge"))
			assert.Equal(t, "fd00::2/64", alloc(t, e, sub(IPv6, "c1", "w1"), "p1-src"))
			assert.Equal(t, "fd00:0:0:1::1/64", alloc(t, e, sub(IPv6, "c1", "w2"), "bridge"))
			assert.Equal(t, "fd00:0:0:100::1/64", alloc(t, e, sub(IPv6, "c2", "w1"), "bridge"))
		})
	}
}

func TestIdempotenceReleaseAndReuse(t *testing.T) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			st := sc.open(t)()
			e := newEngine(t, st, baseConfig())
			ctx := context.Background()
			s := sub(IPv4, "c1", "w1")
			for _, n := range []string{"a", "b", "c"} {
				alloc(t, e, s, n)
			}
			assert.Equal(t, "169.255.0.2/24", alloc(t, e, s, "b"), "repeated allocate returns the same address")
			require.NoError(t, e.Release(ctx, s, "b"))
			require.NoError(t, e.Release(ctx, s, "b"), "release is idempotent")
			_, ok := e.lookup(s, "b")
			assert.False(t, ok)
			assert.Equal(t, "169.255.0.2/24", alloc(t, e, s, "d"), "first fit reuses the released address")
			assert.Equal(t, "169.255.0.4/24", alloc(t, e, s, "b"))

			// Releasing unknown things succeeds and creates nothing.
			before := storedKeys(t, st)
			require.NoError(t, e.Release(ctx, sub(IPv4, "c1", "w9"), "x"))
			require.NoError(t, e.Release(ctx, sub(IPv4, "c9", "w1"), "x"))
			require.NoError(t, e.Release(ctx, sub(IPv6, "c1", "w1"), "x"))
			_, ok = e.lookup(sub(IPv4, "c1", "w9"), "")
			assert.False(t, ok, "release must not create a node")
			assert.False(t, e.hasConduit(IPv4, "c9"))
			assert.False(t, e.hasConduit(IPv6, "c1"))
			assert.Equal(t, before, storedKeys(t, st))
		})
	}
}

// A Release whose caller gave up (its context is done) before the engine
// got to it removes nothing: the caller may have allocated the child again
// in a call that overtook it, and holds the address.
func TestReleaseAbandonedByItsCallerKeepsTheChild(t *testing.T) {
	e := newEngine(t, memory.New(), baseConfig())
	s := sub(IPv4, "c1", "w1")
	held := alloc(t, e, s, "a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, e.Release(ctx, s, "a"), context.Canceled)
	_, ok := e.lookup(s, "a")
	require.True(t, ok)
	assert.NotEqual(t, held, alloc(t, e, s, "b"), "the address is not handed out again")
	assert.Equal(t, held, alloc(t, e, s, "a"))
	require.NoError(t, e.Release(ctx, s, "unknown"), "nothing to release: nothing to refuse")
}

// An Allocate whose caller gave up before the engine got to it creates no
// child: the caller may already have released it in a call that overtook
// this one, and nobody would hold the address.
func TestAllocateAbandonedByItsCallerCreatesNothing(t *testing.T) {
	e := newEngine(t, memory.New(), baseConfig())
	s := sub(IPv4, "c1", "w1")
	held := alloc(t, e, s, "a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.Allocate(ctx, s, "b")
	require.ErrorIs(t, err, context.Canceled)
	_, ok := e.lookup(s, "b")
	require.False(t, ok)
	assert.Equal(t, "169.255.0.2/24", alloc(t, e, s, "c"), "the address is still free")
	p, err := e.Allocate(ctx, s, "a")
	require.NoError(t, err, "an existing child is renewed and answered as usual")
	assert.Equal(t, held, p.String())
}

func TestExhaustionAtEveryLevel(t *testing.T) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			st := sc.open(t)()
			cfg := baseConfig()
			// 2 conduits per pool, 2 nodes per conduit, 2 children per node.
			cfg.IPv4 = &FamilyConfig{Pool: netip.MustParsePrefix("10.0.0.0/28"), ConduitLength: 29, NodeLength: 30}
			cfg.IPv6 = &FamilyConfig{Pool: netip.MustParsePrefix("fd00::/124"), ConduitLength: 125, NodeLength: 126}
			e := newEngine(t, st, cfg)
			ctx := context.Background()
			for _, f := range []Family{IPv4, IPv6} {
				want := map[Family][]string{
					IPv4: {"10.0.0.1/30", "10.0.0.2/30", "10.0.0.5/30", "10.0.0.9/30"},
					IPv6: {"fd00::1/126", "fd00::2/126", "fd00::5/126", "fd00::9/126"},
				}[f]
				assert.Equal(t, want[0], alloc(t, e, sub(f, "c1", "w1"), "a"))
				assert.Equal(t, want[1], alloc(t, e, sub(f, "c1", "w1"), "b"))
				before := storedKeys(t, st)
				_, err := e.Allocate(ctx, sub(f, "c1", "w1"), "c")
				assert.ErrorIs(t, err, ErrExhausted, "node full")
				assert.Equal(t, want[2], alloc(t, e, sub(f, "c1", "w2"), "a"))
				before = storedKeys(t, st)
				_, err = e.Allocate(ctx, sub(f, "c1", "w3"), "a")
				assert.ErrorIs(t, err, ErrExhausted, "conduit full")
				assert.Equal(t, before, storedKeys(t, st))
				_, ok := e.lookup(sub(f, "c1", "w3"), "")
				assert.False(t, ok)
				assert.Equal(t, want[3], alloc(t, e, sub(f, "c2", "w1"), "a"))
				before = storedKeys(t, st)
				_, err = e.Allocate(ctx, sub(f, "c3", "w1"), "a")
				assert.ErrorIs(t, err, ErrExhausted, "pool full")
				assert.Equal(t, before, storedKeys(t, st))
				assert.False(t, e.hasConduit(f, "c3"))
				// Releasing makes room again, at the lowest address.
				require.NoError(t, e.Release(ctx, sub(f, "c1", "w1"), "a"))
				assert.Equal(t, want[0], alloc(t, e, sub(f, "c1", "w1"), "c"))
				e.RemoveConduit("c1")
				assert.Equal(t, want[0], alloc(t, e, sub(f, "c3", "w1"), "a"), "a removed conduit's prefix is reused")
			}
		})
	}
}

func TestLeaseRenewalAndGC(t *testing.T) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			clk, cfg := gcConfig()
			e := newEngine(t, sc.open(t)(), cfg)
			s := sub(IPv4, "c1", "w1")
			alloc(t, e, s, "bridge")
			alloc(t, e, s, "x-src")
			alloc(t, e, s, "y-src")
			clk.Advance(6 * time.Minute)
			alloc(t, e, s, "bridge") // renews the node and the bridge
			alloc(t, e, s, "y-src")  // renewed
			clk.Advance(6 * time.Minute)
			nodes, children := e.CollectGarbage()
			assert.Equal(t, 0, nodes)
			assert.Equal(t, 1, children)
			_, ok := e.lookup(s, "x-src")
			assert.False(t, ok, "stale child collected")
			_, ok = e.lookup(s, "y-src")
			assert.True(t, ok, "renewed child kept")

			// The bridge never expires on its own while its node is renewed.
			for i := 0; i < 3; i++ {
				clk.Advance(8 * time.Minute)
				alloc(t, e, s, "z-src")
				e.CollectGarbage()
				_, ok = e.lookup(s, "bridge")
				assert.True(t, ok, "bridge survives while the node is renewed")
			}
			_, ok = e.lookup(s, "y-src")
			assert.False(t, ok)

			// A node that is not renewed goes with all its children.
			clk.Advance(11 * time.Minute)
			nodes, _ = e.CollectGarbage()
			assert.Equal(t, 1, nodes)
			_, ok = e.lookup(s, "")
			assert.False(t, ok)
			_, ok = e.lookup(s, "bridge")
			assert.False(t, ok)
			assert.Equal(t, "169.255.0.1/24", alloc(t, e, sub(IPv4, "c1", "w2"), "bridge"), "collected node's subnet is reused")
		})
	}
}

func TestGCFirstRunAtStartAndDowntimeNotCounted(t *testing.T) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			open := sc.open(t)
			clk, cfg := gcConfig()
			s := sub(IPv4, "c1", "w1")

			st := open()
			e, err := New(context.Background(), st, cfg)
			require.NoError(t, err)
			alloc(t, e, s, "bridge")
			alloc(t, e, s, "old-src")
			clk.Advance(8 * time.Minute)
			alloc(t, e, s, "bridge")
			alloc(t, e, s, "fresh-src")
			clk.Advance(4 * time.Minute) // old-src is 12 minutes old, but no GC ran
			e.Close()
			require.NoError(t, closeIfBolt(st))

			// Down for three hours: downtime does not count, but what was
			// stale before the stop is collected at start, not an interval
			// later.
			clk.Advance(3 * time.Hour)
			e = newEngine(t, open(), cfg)
			_, ok := e.lookup(s, "old-src")
			assert.False(t, ok, "stale lease collected by the first GC at start")
			_, ok = e.lookup(s, "fresh-src")
			assert.True(t, ok, "lease that was fresh when the IPAM stopped survives the downtime")
			_, ok = e.lookup(s, "bridge")
			assert.True(t, ok)
		})
	}
}

// TestDowntimeExtensionIsPersisted: leases extended by one downtime are not
// aged by it again after the next restart.
func TestDowntimeExtensionIsPersisted(t *testing.T) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			open := sc.open(t)
			clk, cfg := gcConfig()
			s := sub(IPv6, "c1", "w1")
			restart := func(e *Engine, st store.Store, down time.Duration) (*Engine, store.Store) {
				if e != nil {
					e.Close()
					require.NoError(t, closeIfBolt(st))
				}
				clk.Advance(down)
				st = open()
				e, err := New(context.Background(), st, cfg)
				require.NoError(t, err)
				return e, st
			}
			e, st := restart(nil, nil, 0)
			alloc(t, e, s, "a-src")
			e, st = restart(e, st, 3*time.Hour)
			clk.Advance(time.Minute)
			e, st = restart(e, st, time.Minute)
			_, ok := e.lookup(s, "a-src")
			assert.True(t, ok, "1 minute of uptime since the allocation")
			clk.Advance(9*time.Minute - time.Second)
			e.CollectGarbage()
			_, ok = e.lookup(s, "a-src")
			assert.True(t, ok, "just under 10 minutes of uptime")
			clk.Advance(2 * time.Second)
			e.CollectGarbage()
			_, ok = e.lookup(s, "a-src")
			assert.False(t, ok, "just over 10 minutes of uptime without renewal")
			e.Close()
			require.NoError(t, closeIfBolt(st))
		})
	}
}

func closeIfBolt(st store.Store) error {
	if _, ok := st.(interface{ Applies() int }); ok {
		return nil // memory store: reopened as is
	}
	return st.Close()
}

func TestReloadKeepsAddressesAndAvoidsCollisions(t *testing.T) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			open := sc.open(t)
			cfg := baseConfig()
			st := open()
			e, err := New(context.Background(), st, cfg)
			require.NoError(t, err)
			got := map[string]string{}
			for i := 0; i < 50; i++ {
				for _, f := range []Family{IPv4, IPv6} {
					s := sub(f, fmt.Sprintf("c%d", i%3), fmt.Sprintf("w%d", i%4))
					name := fmt.Sprintf("p%d-src", i)
					got[fmt.Sprint(s, name)] = alloc(t, e, s, name)
				}
			}
			require.NoError(t, e.Release(context.Background(), sub(IPv4, "c0", "w0"), "p0-src"))
			delete(got, fmt.Sprint(sub(IPv4, "c0", "w0"), "p0-src"))
			e.Close()
			require.NoError(t, closeIfBolt(st))

			// The configured pool changed: the stored one is kept.
			cfg.IPv4 = &FamilyConfig{Pool: netip.MustParsePrefix("172.16.0.0/16"), ConduitLength: 20, NodeLength: 24}
			e = newEngine(t, open(), cfg)
			seen := map[string]bool{}
			for i := 0; i < 50; i++ {
				for _, f := range []Family{IPv4, IPv6} {
					s := sub(f, fmt.Sprintf("c%d", i%3), fmt.Sprintf("w%d", i%4))
					name := fmt.Sprintf("p%d-src", i)
					if want, ok := got[fmt.Sprint(s, name)]; ok {
						assert.Equal(t, want, alloc(t, e, s, name))
					}
				}
			}
			for _, a := range got {
				seen[a] = true
			}
			for i := 0; i < 50; i++ {
				a := alloc(t, e, sub(IPv4, "c1", "w1"), fmt.Sprintf("new%d", i))
				assert.False(t, seen[a], "new allocation %s collides with a stored one", a)
				assert.True(t, netip.MustParsePrefix("169.255.0.0/16").Contains(netip.MustParsePrefix(a).Addr()), "stored pool kept")
				seen[a] = true
			}
		})
	}
}

func TestStoreFailureIsUnavailableAndHeals(t *testing.T) {
	st := memory.New()
	cfg := baseConfig()
	health := make(chan bool, 10)
	cfg.OnStoreHealth = func(ok bool) { health <- ok }
	e := newEngine(t, st, cfg)
	ctx := context.Background()
	s := sub(IPv4, "c1", "w1")
	assert.Equal(t, "169.255.0.1/24", alloc(t, e, s, "bridge"))
	st.SetFailure(errors.New("disk on fire"))
	_, err := e.Allocate(ctx, s, "new-src")
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Equal(t, "169.255.0.1/24", alloc(t, e, s, "bridge"), "renewals of durable children work without the store")
	st.SetFailure(nil)
	// The failed allocation is kept and retried: the same name gets the
	// same address once it is durable.
	assert.Equal(t, "169.255.0.2/24", alloc(t, e, s, "new-src"))
	assert.False(t, <-health)
	assert.True(t, <-health)
	assert.Contains(t, storedKeys(t, st), string(store.EncodeKey(store.Key{Level: store.LevelChild, Trench: testTrench, Family: 4, Conduit: "c1", Node: "w1", Child: "new-src"}))+"=169.255.0.2/32")
}

func TestInvalidConfig(t *testing.T) {
	bad := []func(c *Config){
		func(c *Config) { c.Trench = "" },
		func(c *Config) { c.IPv4, c.IPv6 = nil, nil },
		func(c *Config) {
			c.IPv4 = &FamilyConfig{Pool: netip.MustParsePrefix("10.0.0.1/16"), ConduitLength: 20, NodeLength: 24}
		},
		func(c *Config) {
			c.IPv4 = &FamilyConfig{Pool: netip.MustParsePrefix("10.0.0.0/16"), ConduitLength: 24, NodeLength: 24}
		},
		func(c *Config) {
			c.IPv4 = &FamilyConfig{Pool: netip.MustParsePrefix("10.0.0.0/16"), ConduitLength: 16, NodeLength: 24}
		},
		func(c *Config) {
			c.IPv4 = &FamilyConfig{Pool: netip.MustParsePrefix("10.0.0.0/16"), ConduitLength: 20, NodeLength: 31}
		},
		func(c *Config) {
			c.IPv6 = &FamilyConfig{Pool: netip.MustParsePrefix("10.0.0.0/16"), ConduitLength: 20, NodeLength: 24}
		},
		func(c *Config) { c.GCInterval = time.Hour; c.GCThreshold = 0 },
	}
	for i, mutate := range bad {
		cfg := baseConfig()
		mutate(&cfg)
		assert.Error(t, cfg.Validate(), "case %d", i)
	}
	cfg := baseConfig()
	assert.NoError(t, cfg.Validate())
}

// TestLeasesAreWrittenBehind: renewals touch memory only; FlushLeases (and
// Close) persist them.
func TestLeasesAreWrittenBehind(t *testing.T) {
	clk := newClock()
	cfg := baseConfig()
	cfg.Clock = clk
	cfg.LeaseFlushInterval = time.Hour
	st := memory.New()
	e := newEngine(t, st, cfg)
	s := sub(IPv4, "c1", "w1")
	alloc(t, e, s, "a-src")
	stored := func() time.Time {
		recs, err := st.Load(context.Background())
		require.NoError(t, err)
		for _, r := range recs {
			if r.Key.Child == "a-src" {
				return r.Updated
			}
		}
		t.Fatal("a-src not stored")
		return time.Time{}
	}
	t0 := clk.Now()
	assert.True(t, stored().Equal(t0))
	applies := st.Applies()
	clk.Advance(time.Minute)
	alloc(t, e, s, "a-src")
	require.NoError(t, e.Sync(context.Background()))
	assert.Equal(t, applies, st.Applies(), "a renewal writes nothing")
	assert.True(t, stored().Equal(t0))
	e.FlushLeases()
	require.NoError(t, e.Sync(context.Background()))
	assert.True(t, stored().Equal(t0.Add(time.Minute)), "flushed")
	clk.Advance(time.Minute)
	alloc(t, e, s, "a-src")
	e.Close()
	assert.True(t, stored().Equal(t0.Add(2*time.Minute)), "Close flushes")
}
