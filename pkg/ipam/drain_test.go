package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
)

// heldKey names a child of conduit-level test data.
type heldKey struct {
	f           Family
	node, child string
}

// held is what the proxies of a conduit hold: two nodes, both families, a
// bridge and a few children each.
type held map[heldKey]string

func allocateHeld(t *testing.T, e *Engine, conduit string) held {
	t.Helper()
	h := held{}
	for _, f := range []Family{IPv4, IPv6} {
		for _, n := range []string{"w1", "w2"} {
			for _, ch := range []string{"bridge", "lb-1-src", "lb-1-dst", "t-1-src", "t-1-dst"} {
				h[heldKey{f, n, ch}] = alloc(t, e, sub(f, conduit, n), ch)
			}
		}
	}
	return h
}

// renew re-allocates every held child (what the proxies' refreshes do) and
// asserts each gets the address it holds.
func (h held) renew(t *testing.T, e *Engine, conduit string) {
	t.Helper()
	for k, addr := range h {
		assert.Equal(t, addr, alloc(t, e, sub(k.f, conduit, k.node), k.child), "%v keeps its address", k)
	}
}

// assertNoDuplicate checks that no address is held twice in the engine and
// that each held address still belongs to its holder, if to anyone.
func assertNoDuplicate(t *testing.T, e *Engine, conduit string, h held) {
	t.Helper()
	owner := map[netip.Addr]string{}
	for _, tr := range e.trenches {
		for _, c := range tr.conduitList() {
			c.mu.RLock()
			for _, n := range c.nodes {
				n.mu.RLock()
				for _, ch := range n.children {
					who := fmt.Sprintf("%s/%v", c.name, heldKey{tr.family, n.name, ch.name})
					assert.NotContains(t, owner, ch.addr, "%s and %s share %s", owner[ch.addr], who, ch.addr)
					owner[ch.addr] = who
				}
				n.mu.RUnlock()
			}
			c.mu.RUnlock()
		}
	}
	for k, p := range h {
		a := netip.MustParsePrefix(p).Addr()
		if who, ok := owner[a]; ok {
			assert.Equal(t, fmt.Sprintf("%s/%v", conduit, k), who, "held %s", a)
		}
	}
}

// flap drops conduit "a" from the list for d, with the proxies renewing
// and new children asking meanwhile, and brings it back.
func TestConduitFlapKeepsEveryAddress(t *testing.T) {
	for _, d := range []time.Duration{5 * time.Second, 60 * time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			clk, cfg := gcConfig()
			e := newEngine(t, memory.New(), cfg)
			h := allocateHeld(t, e, "a")
			allocateHeld(t, e, "b")
			e.SyncConduits([]string{"a", "b"})

			assert.Equal(t, ConduitChanges{Draining: 2}, e.SyncConduits([]string{"a-renamed", "b"}))
			for tick := time.Duration(0); tick < d; tick += 5 * time.Second {
				clk.Advance(5 * time.Second)
				e.CollectGarbage()
				h.renew(t, e, "a")
				_, err := e.Allocate(context.Background(), sub(IPv4, "a", "w1"), "t-2-src")
				assert.ErrorIs(t, err, ErrDraining, "no new child in a draining conduit")
				_, err = e.Allocate(context.Background(), sub(IPv6, "a", "w3"), "bridge")
				assert.ErrorIs(t, err, ErrDraining, "no new node in a draining conduit")
				// Other conduits are served, never from a's subnets.
				alloc(t, e, sub(IPv4, "c", "w1"), "bridge")
				alloc(t, e, sub(IPv4, "b", "w1"), "t-2-src")
				assertNoDuplicate(t, e, "a", h)
			}
			assert.Equal(t, ConduitChanges{Revived: 2}, e.SyncConduits([]string{"a", "b"}))
			h.renew(t, e, "a")
			assert.Equal(t, "169.255.0.6/24", alloc(t, e, sub(IPv4, "a", "w1"), "t-2-src"), "serving again, next free address")
			assertNoDuplicate(t, e, "a", h)
		})
	}
}

// TestConduitGoneForGood: the allocations of a conduit that does not come
// back go when their leases end (or when released); a node goes with its
// last child, the conduit with its last node, and only then are its subnets
// handed out again.
func TestConduitGoneForGood(t *testing.T) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			clk, cfg := gcConfig()
			st := sc.open(t)()
			e := newEngine(t, st, cfg)
			h := allocateHeld(t, e, "a")
			e.SyncConduits([]string{"a"})
			e.SyncConduits(nil)

			// Node w2 (both families) is still renewed by its proxy; w1's
			// proxy is gone; one of w2's targets leaves.
			for i := 0; i < 3; i++ {
				clk.Advance(6 * time.Minute)
				for k, addr := range h {
					if k.node == "w2" && k.child != "t-1-src" {
						assert.Equal(t, addr, alloc(t, e, sub(k.f, "a", "w2"), k.child))
					}
				}
				e.CollectGarbage()
			}
			for _, f := range []Family{IPv4, IPv6} {
				_, ok := e.lookup(sub(f, "a", "w1"), "")
				assert.False(t, ok, "w1 expired")
				_, ok = e.lookup(sub(f, "a", "w2"), "t-1-src")
				assert.False(t, ok, "t-1-src expired")
				_, ok = e.lookup(sub(f, "a", "w2"), "lb-1-src")
				assert.True(t, ok, "renewed child kept")
			}
			assert.Equal(t, "169.255.16.1/24", alloc(t, e, sub(IPv4, "new", "w1"), "bridge"), "a keeps its subnet while leased")

			// IPv4: the proxy releases what it holds; the node and the
			// conduit go with the last release.
			for _, ch := range []string{"lb-1-src", "lb-1-dst", "t-1-dst"} {
				require.NoError(t, e.Release(context.Background(), sub(IPv4, "a", "w2"), ch))
				assert.True(t, e.hasConduit(IPv4, "a"))
			}
			require.NoError(t, e.Release(context.Background(), sub(IPv4, "a", "w2"), BridgeChild))
			assert.False(t, e.hasConduit(IPv4, "a"), "conduit gone with its last child")
			// IPv6: nothing renewed any more; the GC takes the rest.
			assert.True(t, e.hasConduit(IPv6, "a"))
			clk.Advance(11 * time.Minute)
			e.CollectGarbage()
			assert.False(t, e.hasConduit(IPv6, "a"))
			require.NoError(t, e.Sync(context.Background()))
			for _, k := range storedKeys(t, st) {
				assert.NotRegexp(t, "\x00a(\x00|=)", k, "conduit a removed from the store")
			}
			assert.Equal(t, "169.255.0.1/24", alloc(t, e, sub(IPv4, "newer", "w1"), "bridge"), "a's subnet free again")
		})
	}
}

func TestDrainingEmptyConduitGoesAtOnce(t *testing.T) {
	e := newEngine(t, memory.New(), baseConfig())
	alloc(t, e, sub(IPv4, "a", "w1"), "x-src")
	require.NoError(t, e.Release(context.Background(), sub(IPv4, "a", "w1"), "x-src"))
	e.SyncConduits([]string{"a"})
	assert.Equal(t, ConduitChanges{Draining: 1, Removed: 1}, e.SyncConduits(nil))
	assert.False(t, e.hasConduit(IPv4, "a"))
}

func TestDrainingIsFailedPreconditionOverGRPC(t *testing.T) {
	e := newEngine(t, memory.New(), baseConfig())
	c := serve(t, e, nil)
	ctx := context.Background()
	p, err := c.Allocate(ctx, req("bridge", testTrench, "c1", "w1", ipamv1.IPFamily_IPV4))
	require.NoError(t, err)
	e.SyncConduits([]string{"c1"})
	e.SyncConduits([]string{"c2"})
	_, err = c.Allocate(ctx, req("t-src", testTrench, "c1", "w1", ipamv1.IPFamily_IPV4))
	assert.Equal(t, codes.FailedPrecondition, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), `conduit "c1" is not in the configuration`)
	again, err := c.Allocate(ctx, req("bridge", testTrench, "c1", "w1", ipamv1.IPFamily_IPV4))
	require.NoError(t, err)
	assert.Equal(t, p.GetAddress(), again.GetAddress(), "renewal served while draining")
	_, err = c.Release(ctx, req("t-src", testTrench, "c1", "w1", ipamv1.IPFamily_IPV4))
	assert.NoError(t, err, "release stays silent")
	reg := prometheus.NewRegistry()
	reg.MustRegister(e)
	assert.Equal(t, 1.0, testutil.Gather(t, reg)[`causeway_ipam_conduits_draining{family="ipv4",trench="trench-a"}`])
}

// TestNodeKeptWhileAChildIsLeased: after a crash a node's lease (written
// behind) can look older than a child created after its last flush; the GC
// keeps the node, and the child's address, while the child is leased.
func TestNodeKeptWhileAChildIsLeased(t *testing.T) {
	clk, cfg := gcConfig()
	e := newEngine(t, memory.New(), cfg)
	s := sub(IPv4, "c1", "w1")
	alloc(t, e, s, "old-src")
	clk.Advance(8 * time.Minute)
	fresh := alloc(t, e, s, "fresh-src")
	// As after a reload: the node's lease older than its newest child's.
	tr := e.trenches[IPv4]
	n := tr.conduits["c1"].nodes["w1"]
	n.updated.Store(clk.Now().Add(-9 * time.Minute).UnixNano())
	clk.Advance(4 * time.Minute)
	nodes, children := e.CollectGarbage()
	assert.Equal(t, 0, nodes)
	assert.Equal(t, 1, children, "old-src collected")
	assert.Equal(t, fresh, alloc(t, e, s, "fresh-src"))
}
