package ipam

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A deleted node's subnets go, in every conduit and family, only once the
// leases of the node and of every child in it (the bridge's too) have
// ended, never before; FreeNode says when the last one ends.
func TestFreeNodeAfterItsLeases(t *testing.T) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			clk, cfg := gcConfig()
			e := newEngine(t, sc.open(t)(), cfg)
			alloc(t, e, sub(IPv4, "c1", "w1"), "bridge")
			alloc(t, e, sub(IPv6, "c1", "w1"), "bridge")
			alloc(t, e, sub(IPv4, "c2", "w1"), "bridge")
			alloc(t, e, sub(IPv4, "c1", "w2"), "bridge")
			names := e.NodeNames()
			slices.Sort(names)
			assert.Equal(t, []string{"w1", "w2"}, names)

			clk.Advance(5 * time.Minute)
			alloc(t, e, sub(IPv4, "c2", "w1"), "t-src") // the last lease of w1
			freed, until := e.FreeNode("w1")
			assert.Zero(t, freed, "leased: kept")
			assert.WithinDuration(t, clk.Now().Add(10*time.Minute), until, 0)

			clk.Advance(7 * time.Minute) // c1's leases ended, c2's not
			freed, until = e.FreeNode("w1")
			assert.Equal(t, 2, freed, "c1 in both families")
			assert.WithinDuration(t, clk.Now().Add(3*time.Minute), until, 0)
			_, ok := e.lookup(sub(IPv4, "c1", "w1"), "bridge")
			assert.False(t, ok)
			_, ok = e.lookup(sub(IPv4, "c2", "w1"), "t-src")
			assert.True(t, ok, "still leased")

			clk.Advance(3 * time.Minute)
			freed, _ = e.FreeNode("w1")
			assert.Zero(t, freed, "a lease that ends now has not ended")
			clk.Advance(time.Nanosecond)
			freed, until = e.FreeNode("w1")
			assert.Equal(t, 1, freed)
			assert.True(t, until.IsZero(), "nothing left")
			assert.Equal(t, []string{"w2"}, e.NodeNames(), "another node is not touched")
			require.Equal(t, "169.255.0.1/24", alloc(t, e, sub(IPv4, "c1", "w3"), "bridge"), "the freed subnet is reused")
		})
	}
}

// Without a GC threshold no lease ends: nothing is freed.
func TestFreeNodeWithoutLeases(t *testing.T) {
	cfg := baseConfig()
	e := newEngine(t, stores[0].open(t)(), cfg)
	alloc(t, e, sub(IPv4, "c1", "w1"), "bridge")
	freed, until := e.FreeNode("w1")
	assert.Zero(t, freed)
	assert.True(t, until.IsZero())
	assert.Equal(t, []string{"w1"}, e.NodeNames())
}
