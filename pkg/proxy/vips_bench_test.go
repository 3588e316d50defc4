package proxy

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/dataplane"
)

// discardDataplane accepts every state and keeps none.
type discardDataplane struct{}

func (discardDataplane) Apply(dataplane.State) error { return nil }

// BenchmarkSetVIPs measures SetVIPs with 10,000 VIPs: "changed" alternates
// between two lists that differ by one VIP, "unchanged" sets the same list
// again.
//
//	go test -run '^$' -bench SetVIPs ./pkg/proxy
func BenchmarkSetVIPs(b *testing.B) {
	const n = 10000
	p, err := New(context.Background(), Config{
		Conduit: "conduit-a", Trench: "trench-a", Node: "worker-1",
		IPAM: serveIPAM(b, newFakeIPAM()), Dataplane: discardDataplane{},
		RetryInterval: 1e6, Logger: testLogger(),
	})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, p.Close(context.Background())) })
	vips := make([]netip.Prefix, 0, n+1)
	for i := range n {
		vips = append(vips, netip.PrefixFrom(netip.AddrFrom4([4]byte{20, byte(i >> 16), byte(i >> 8), byte(i)}), 32))
	}
	other := append(vips[1:n:n], netip.MustParsePrefix("30.0.0.1/32"))
	lists := [2][]netip.Prefix{vips[:n], other}

	b.Run("changed", func(b *testing.B) {
		for i := range b.N {
			require.NoError(b, p.SetVIPs(lists[i%2]))
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		require.NoError(b, p.SetVIPs(lists[0]))
		b.ResetTimer()
		for range b.N {
			require.NoError(b, p.SetVIPs(lists[0]))
		}
	})
	require.Equal(b, n, p.Stats().VIPs)
}
