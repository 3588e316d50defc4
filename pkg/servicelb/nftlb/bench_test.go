package nftlb

import (
	"fmt"
	"testing"
	"time"

	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/slbtest"
)

// BenchmarkSync programs n service ports (3 endpoints each, without and
// with ClientIP affinity) into an empty table, then replaces one endpoint of
// one service port; objects/op is what each transaction sent, kernel-µs/op
// the transaction's round trip.
func BenchmarkSync(b *testing.B) {
	for _, aff := range []servicelb.AffinityType{servicelb.AffinityNone, servicelb.AffinityClientIP} {
		for _, n := range []int{1000, 10000} {
			benchSync(b, n, aff)
		}
	}
}

func benchSync(b *testing.B, n int, aff servicelb.AffinityType) {
	{
		svcs, eps := syntheticServices(n, 3, aff)
		b.Run(fmt.Sprintf("affinity=%s/ports=%d/from-empty", aff, n), func(b *testing.B) {
			topo := slbtest.New(b, 0)
			p := newTestProvider(b, topo, Options{})
			objects := 0
			for range b.N {
				b.StopTimer()
				if err := p.CleanupLeftovers(); err != nil {
					b.Fatal(err)
				}
				p.OnServiceUpdate(svcs)
				p.OnEndpointsUpdate(eps)
				b.StartTimer()
				if err := p.SyncNow(); err != nil {
					b.Fatal(err)
				}
				objects = p.Stats().LastObjects
			}
			b.ReportMetric(float64(objects), "objects/op")
		})
		b.Run(fmt.Sprintf("affinity=%s/ports=%d/one-endpoint", aff, n), func(b *testing.B) {
			topo := slbtest.New(b, 0)
			p := newTestProvider(b, topo, Options{})
			p.OnServiceUpdate(svcs)
			p.OnEndpointsUpdate(eps)
			if err := p.SyncNow(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			objects := 0
			var kernelTime time.Duration
			for range b.N {
				b.StopTimer()
				changeOneEndpoint(eps)
				p.OnEndpointsUpdate(eps)
				b.StartTimer()
				if err := p.SyncNow(); err != nil {
					b.Fatal(err)
				}
				objects = p.Stats().LastObjects
				kernelTime += p.Stats().LastKernel
			}
			b.ReportMetric(float64(objects), "objects/op")
			b.ReportMetric(float64(kernelTime.Microseconds())/float64(b.N), "kernel-µs/op")
		})
	}
}
