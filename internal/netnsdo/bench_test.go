package netnsdo_test

import (
	"testing"

	"github.com/causeway-net/causeway/internal/netnsdo"
	"github.com/causeway-net/causeway/internal/testutil"
)

// BenchmarkDo is the cost of one switch into a namespace and back (what a
// provider given a foreign namespace pays per dial), with nothing done
// inside.
func BenchmarkDo(b *testing.B) {
	ns := testutil.NewNetNS(b, "nsdob")
	for b.Loop() {
		if err := netnsdo.Do(ns.Handle, func() error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("FIGURE: netnsdo.Do round trip into another namespace: %.1f µs", float64(b.Elapsed().Microseconds())/float64(b.N))
}
