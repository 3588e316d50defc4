package ipam

import (
	"math/rand"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSlotsFirstFit compares slots with a naive lowest-free model under
// random takes and puts, starting from a loaded set with gaps.
func TestSlotsFirstFit(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	const first, limit = 1, 200
	used := map[uint64]bool{}
	var initial []uint64
	for i := uint64(first); i < limit; i++ {
		if r.Intn(3) == 0 {
			used[i] = true
			initial = append(initial, i)
		}
	}
	s := newSlots(first, limit, initial)
	for step := 0; step < 5000; step++ {
		if r.Intn(2) == 0 && len(used) > 0 {
			for i := range used { // any taken one
				delete(used, i)
				s.put(i)
				break
			}
			continue
		}
		want, ok := uint64(0), false
		for i := uint64(first); i < limit; i++ {
			if !used[i] {
				want, ok = i, true
				break
			}
		}
		got, gotOK := s.take()
		require.Equal(t, ok, gotOK, "step %d", step)
		if ok {
			require.Equal(t, want, got, "step %d", step)
			used[got] = true
		}
		require.Equal(t, uint64(len(used)), s.used)
	}
}

func TestSubPrefixAndIndex(t *testing.T) {
	for _, tc := range []struct {
		parent string
		sublen int
		index  uint64
		want   string
	}{
		{"169.255.0.0/16", 20, 1, "169.255.16.0/20"},
		{"169.255.16.0/20", 24, 15, "169.255.31.0/24"},
		{"169.255.31.0/24", 32, 254, "169.255.31.254/32"},
		{"fd00::/48", 56, 255, "fd00:0:0:ff00::/56"},
		{"fd00:0:0:ff00::/56", 64, 3, "fd00:0:0:ff03::/64"},
		{"fd00:0:0:ff03::/64", 128, 1<<63 - 2, "fd00::ff03:7fff:ffff:ffff:fffe/128"},
		{"::/0", 64, 1 << 40, "0:100::/64"},
	} {
		parent := netip.MustParsePrefix(tc.parent)
		got := subPrefix(parent, tc.sublen, tc.index)
		assert.Equal(t, tc.want, got.String())
		i, ok := subIndex(parent, tc.sublen, got)
		assert.True(t, ok)
		assert.Equal(t, tc.index, i)
	}
	_, ok := subIndex(netip.MustParsePrefix("10.0.0.0/16"), 24, netip.MustParsePrefix("10.1.0.0/24"))
	assert.False(t, ok, "outside")
	_, ok = subIndex(netip.MustParsePrefix("10.0.0.0/16"), 24, netip.MustParsePrefix("10.0.0.0/25"))
	assert.False(t, ok, "wrong length")
	_, ok = subIndex(netip.MustParsePrefix("::/0"), 128, netip.MustParsePrefix("ffff::1/128"))
	assert.False(t, ok, "index beyond 64 bits")
}
