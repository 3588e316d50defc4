package ipam

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/pkg/ipam/store/bolt"
)

// benchEngine serves an engine on a bolt store in a temporary directory
// (fsync on) over gRPC on loopback, with the RPC metrics interceptor as in
// cmd/ipam, and returns one client connection per 8 callers (a proxy has
// its own connection). maxBatch 1 is the baseline: one commit, and so one
// fsync, per allocation.
func benchEngine(b *testing.B, maxBatch, callers int) ([]ipamv1.IpamClient, *Engine) {
	st, err := bolt.Open(filepath.Join(b.TempDir(), "registry.db"), time.Second)
	require.NoError(b, err)
	cfg := baseConfig()
	cfg.MaxBatch = maxBatch
	e, err := New(context.Background(), st, cfg)
	require.NoError(b, err)
	b.Cleanup(func() {
		e.Close()
		_ = st.Close()
	})
	return serveConns(b, e, NewRPCMetrics(), max(1, callers/8)), e
}

// reportCommits reports the mean changes per store commit and commit time.
func reportCommits(b *testing.B, e *Engine) {
	reg := prometheus.NewRegistry()
	require.NoError(b, reg.Register(e))
	mfs, err := reg.Gather()
	require.NoError(b, err)
	for _, mf := range mfs {
		if h := mf.GetMetric()[0].GetHistogram(); h != nil && h.GetSampleCount() > 0 {
			mean := h.GetSampleSum() / float64(h.GetSampleCount())
			switch mf.GetName() {
			case "causeway_ipam_store_commit_batch_size":
				b.ReportMetric(mean, "changes/commit")
			case "causeway_ipam_store_commit_duration_seconds":
				b.ReportMetric(mean*1e3, "ms/commit")
			}
		}
	}
}

// runCallers runs b.N calls spread over callers goroutines; call gets the
// caller and the call index. It reports allocs/s.
func runCallers(b *testing.B, callers int, call func(caller int, i int64) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	b.ResetTimer()
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if err := call(c, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "allocs/s")
}

// BenchmarkAllocateNew: every call allocates a new child that is durable
// when acknowledged, with group commit and with one fsync per allocation.
func BenchmarkAllocateNew(b *testing.B) {
	for _, mode := range []struct {
		name     string
		maxBatch int
	}{{"group-commit", 0}, {"fsync-per-allocation", 1}} {
		for _, callers := range []int{8, 64} {
			b.Run(fmt.Sprintf("%s/callers-%d", mode.name, callers), func(b *testing.B) {
				cs, e := benchEngine(b, mode.maxBatch, callers)
				ctx := context.Background()
				// Nodes exist before the clock starts; IPv6 /64 nodes never fill.
				for k := 0; k < callers; k++ {
					_, err := cs[0].Allocate(ctx, req("bridge", testTrench, "c1", fmt.Sprintf("w%d", k), ipamv1.IPFamily_IPV6))
					require.NoError(b, err)
				}
				runCallers(b, callers, func(k int, i int64) error {
					_, err := cs[k%len(cs)].Allocate(ctx, req(fmt.Sprintf("p%d-src", i), testTrench, "c1", fmt.Sprintf("w%d", k), ipamv1.IPFamily_IPV6))
					return err
				})
				reportCommits(b, e)
			})
		}
	}
}

// BenchmarkAllocateRenew: every call renews one of 1,000 existing children.
func BenchmarkAllocateRenew(b *testing.B) {
	for _, callers := range []int{8, 64} {
		b.Run(fmt.Sprintf("callers-%d", callers), func(b *testing.B) {
			cs, _ := benchEngine(b, 0, callers)
			ctx := context.Background()
			reqs := make([]*ipamv1.Child, 1000)
			for i := range reqs {
				reqs[i] = req(fmt.Sprintf("p%d-src", i), testTrench, "c1", fmt.Sprintf("w%d", i%16), ipamv1.IPFamily_IPV4)
				_, err := cs[0].Allocate(ctx, reqs[i])
				require.NoError(b, err)
			}
			runCallers(b, callers, func(k int, i int64) error {
				_, err := cs[k%len(cs)].Allocate(ctx, reqs[i%int64(len(reqs))])
				return err
			})
		})
	}
}

// BenchmarkEngineRenew is the renewal path without gRPC: what the engine
// itself costs per call.
func BenchmarkEngineRenew(b *testing.B) {
	st, err := bolt.Open(filepath.Join(b.TempDir(), "registry.db"), time.Second)
	require.NoError(b, err)
	e, err := New(context.Background(), st, baseConfig())
	require.NoError(b, err)
	defer func() {
		e.Close()
		_ = st.Close()
	}()
	ctx := context.Background()
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("p%d-src", i)
		_, err := e.Allocate(ctx, sub(IPv4, "c1", fmt.Sprintf("w%d", i%16)), names[i])
		require.NoError(b, err)
	}
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(next.Add(1)) % len(names)
			if _, err := e.Allocate(ctx, sub(IPv4, "c1", fmt.Sprintf("w%d", i%16)), names[i]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "allocs/s")
}
