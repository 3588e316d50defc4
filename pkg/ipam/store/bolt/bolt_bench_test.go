package bolt

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// BenchmarkApply commits batches of new child records scattered over 64
// nodes, as concurrent proxies produce them.
func BenchmarkApply(b *testing.B) {
	for _, batch := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("batch-%d", batch), func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "db"), time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ops := make([]store.Op, batch)
			n := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := range ops {
					n++
					ops[j] = store.Op{Kind: store.OpPut, Record: store.Record{
						Key:    store.Key{Level: store.LevelChild, Trench: "t", Family: 6, Conduit: "c", Node: fmt.Sprintf("w%d", n%64), Child: fmt.Sprintf("p%d-src", n)},
						Prefix: netip.MustParsePrefix("fd00::1/128"), Updated: time.Now(),
					}}
				}
				if err := s.Apply(context.Background(), ops); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "changes/s")
		})
	}
}
