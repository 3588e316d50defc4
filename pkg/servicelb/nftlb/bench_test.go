package nftlb

import (
	"fmt"
	"testing"
	"time"

	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/slbtest"
)

// BenchmarkSync programs n service ports (3 endpoints each, ClientIP
// affinity: every object kind is there) into an empty table, then changes
// one endpoint of one service port; objects/op is what each transaction
// sent.
func BenchmarkSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		svcs, eps := syntheticServices(n, 3, servicelb.AffinityClientIP)
		b.Run(fmt.Sprintf("ports=%d/from-empty", n), func(b *testing.B) {
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
		b.Run(fmt.Sprintf("ports=%d/one-endpoint", n), func(b *testing.B) {
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
