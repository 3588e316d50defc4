package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/bolt"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
)

// BenchmarkSetIPContext measures connection setups (SetIPContext of a new
// dual-stack LB connection: four Allocate calls over gRPC on bufconn) with
// 64 concurrent callers. "parallel" is the proxy as it is (per-id locks);
// "global-lock" wraps every call in one mutex, as Meridio's proxy does.
// Compare the setups/s of the two modes for each IPAM back end.
//
//	go test -run '^$' -bench SetIPContext -benchtime 2000x ./pkg/proxy
func BenchmarkSetIPContext(b *testing.B) {
	backends := []struct {
		name string
		ipam func(b *testing.B) ipamv1.IpamClient
	}{
		{"fake-0ms", func(b *testing.B) ipamv1.IpamClient {
			return serveIPAM(b, &fakeIPAM{nodes: map[string]*fakeNode{}, wide: true})
		}},
		{"fake-1ms", func(b *testing.B) ipamv1.IpamClient {
			return serveIPAM(b, &fakeIPAM{nodes: map[string]*fakeNode{}, wide: true, latency: time.Millisecond})
		}},
		{"real-memory", func(b *testing.B) ipamv1.IpamClient {
			return serveIPAM(b, ipam.NewServer(benchEngine(b, memory.New())))
		}},
		{"real-bolt", func(b *testing.B) ipamv1.IpamClient {
			st, err := bolt.Open(filepath.Join(b.TempDir(), "registry.db"), time.Second)
			require.NoError(b, err)
			b.Cleanup(func() { _ = st.Close() })
			return serveIPAM(b, ipam.NewServer(benchEngine(b, st)))
		}},
	}
	for _, be := range backends {
		for _, mode := range []string{"parallel", "global-lock", "meridio"} {
			global := mode != "parallel"
			b.Run(be.name+"/"+mode, func(b *testing.B) {
				p, err := New(context.Background(), Config{
					Conduit: "conduit-a", Trench: "trench-a", Node: "bench",
					IPAM: be.ipam(b), Dataplane: newFakeDataplane(), Logger: testLogger(),
				})
				require.NoError(b, err)
				p.serialFamilies = mode == "meridio"
				defer func() { require.NoError(b, p.Close(context.Background())) }()
				benchSetups(b, p, global, 64)
			})
		}
	}
}

func benchEngine(b *testing.B, st store.Store) *ipam.Engine {
	// Wide IPv4 node subnets so that thousands of setups fit in one node.
	return engineOn(b, st, ipam.FamilyConfig{Pool: netip.MustParsePrefix("10.0.0.0/8"), ConduitLength: 12, NodeLength: 16})
}

// benchSetups runs b.N setups of new connections on workers goroutines,
// optionally serialized by one global mutex.
func benchSetups(b *testing.B, p *Proxy, global bool, workers int) {
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		gmu    sync.Mutex
		failed atomic.Int64
	)
	b.ResetTimer()
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				conn := lbConn(fmt.Sprintf("conn-%d", i))
				if global {
					gmu.Lock()
				}
				err := p.SetIPContext(context.Background(), conn, LBConn)
				if global {
					gmu.Unlock()
				}
				if err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d setups failed", n)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "setups/s")
}
