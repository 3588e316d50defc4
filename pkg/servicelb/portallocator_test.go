package servicelb

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParsePortRange: the syntax of kube-proxy's --proxy-port-range; every
// range read prints as a string that reads back the same.
func TestParsePortRange(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    PortRange
		wantErr bool
	}{
		{"", PortRange{}, false},
		{"0-0", PortRange{0, 1}, false}, // the kernel's choice, as ""
		{"0", PortRange{0, 1}, false},
		{"30000-30009", PortRange{30000, 10}, false},
		{" 30000-30009 ", PortRange{30000, 10}, false},
		{"5000", PortRange{5000, 1}, false},
		{"65535", PortRange{65535, 1}, false},
		{"100 - 200", PortRange{}, true}, // no blanks around the dash
		{"100 -200", PortRange{}, true},
		{"100- 200", PortRange{}, true},
		{"-100", PortRange{}, true},
		{"100-", PortRange{}, true},
		{"10-5", PortRange{}, true},
		{"1-70000", PortRange{}, true},
		{"70000", PortRange{}, true},
		{"0-5", PortRange{}, true}, // kube-proxy: the kernel's choice; here refused
		{"a-b", PortRange{}, true},
	} {
		got, err := ParsePortRange(tc.in)
		if tc.wantErr {
			assert.Error(t, err, "%q", tc.in)
			continue
		}
		require.NoError(t, err, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
		again, err := ParsePortRange(got.String())
		require.NoError(t, err, "%q printed as %q", tc.in, got.String())
		assert.Equal(t, got, again, "%q printed as %q", tc.in, got.String())
	}
	assert.Equal(t, "0-0", PortRange{0, 1}.String())
	assert.Equal(t, "", PortRange{}.String())
	assert.True(t, PortRange{0, 1}.Empty(), "0-0 holds no port")
}

func TestPortAllocator(t *testing.T) {
	t.Run("empty range lets the kernel choose", func(t *testing.T) {
		a := NewPortAllocator(PortRange{})
		for range 3 {
			p, err := a.AllocateNext()
			require.NoError(t, err)
			assert.Zero(t, p)
		}
		a.Release(0)
	})
	t.Run("one port: exhausted, released, taken again", func(t *testing.T) {
		a := NewPortAllocator(PortRange{Base: 1, Size: 1})
		p, err := a.AllocateNext()
		require.NoError(t, err)
		assert.Equal(t, 1, p)
		_, err = a.AllocateNext()
		require.ErrorIs(t, err, ErrPortRangeExhausted)
		assert.Contains(t, err.Error(), "1-1")
		a.Release(1)
		p, err = a.AllocateNext()
		require.NoError(t, err)
		assert.Equal(t, 1, p)
		_, err = a.AllocateNext()
		require.ErrorIs(t, err, ErrPortRangeExhausted)
	})
	t.Run("never one port twice, random order", func(t *testing.T) {
		r := PortRange{Base: 1, Size: 100}
		a := NewPortAllocator(r)
		allocate := func() []int {
			var got []int
			for range r.Size {
				p, err := a.AllocateNext()
				require.NoError(t, err)
				require.GreaterOrEqual(t, p, 1)
				require.LessOrEqual(t, p, 100)
				got = append(got, p)
			}
			_, err := a.AllocateNext()
			require.ErrorIs(t, err, ErrPortRangeExhausted)
			sorted := slices.Sorted(slices.Values(got))
			require.Equal(t, 100, len(slices.Compact(sorted)), "a port was handed out twice")
			return got
		}
		first := allocate()
		for _, p := range first {
			a.Release(p)
		}
		second := allocate()
		assert.NotEqual(t, first, second, "two full allocations in the same order")
	})
	t.Run("foreign and double releases are ignored", func(t *testing.T) {
		a := NewPortAllocator(PortRange{Base: 10, Size: 2})
		p, err := a.AllocateNext()
		require.NoError(t, err)
		a.Release(9)
		a.Release(12)
		other := 10 + 11 - p
		a.Release(other) // never handed out
		a.Release(p)
		a.Release(p)
		for range 2 {
			_, err := a.AllocateNext()
			require.NoError(t, err)
		}
		_, err = a.AllocateNext()
		require.ErrorIs(t, err, ErrPortRangeExhausted)
	})
}
