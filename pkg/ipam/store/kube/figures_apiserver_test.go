//go:build apiserver

package kube

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/apiservertest"
	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/bolt"
)

// New allocations per second, and their p50/p99 latency, with 1, 8 and 64
// callers, on the Kubernetes store (a real API server and etcd on this
// machine) and on the bbolt store, in the same run; with the API writes
// per allocation of the Kubernetes store and the processor time each
// allocation cost in the API server, in etcd and in this process (the
// engine, the store and the client). The callers allocate new children
// for two seconds on 8 nodes (as proxies on 8 nodes would: the callers of a
// node share its subnet, and a new one when it is full).
func TestFiguresKubeVsBolt(t *testing.T) {
	api, client := realAPI(t)
	for _, callers := range []int{1, 8, 64} {
		for _, kind := range []string{"bolt", "kubernetes"} {
			trench := fmt.Sprintf("%s%d", kind[:1], callers)
			var st store.Store
			var writes func() uint64
			if kind == "bolt" {
				b, err := bolt.Open(filepath.Join(t.TempDir(), "registry.db"), time.Second)
				require.NoError(t, err)
				st, writes = b, func() uint64 { return 0 }
			} else {
				k, err := Open(context.Background(), Options{Client: client, Namespace: "default", Trench: trench, Identity: "bench", Logger: slog.New(slog.DiscardHandler)})
				require.NoError(t, err)
				st, writes = k, k.Writes
			}
			cpu := cpuNow(api)
			n, lat, w := allocateFor(t, st, trench, callers, 2*time.Second, writes)
			used := cpuNow(api).since(cpu)
			require.NoError(t, st.Close())
			slices.Sort(lat)
			perAlloc := fmt.Sprintf(", CPU per allocation: this process %s", used.self/time.Duration(n))
			if kind == "kubernetes" {
				perAlloc = fmt.Sprintf(", %.3f API writes per allocation, CPU per allocation: API server %s, etcd %s, this process %s",
					float64(w)/float64(n), used.api/time.Duration(n), used.etcd/time.Duration(n), used.self/time.Duration(n))
			}
			fmt.Printf("FIGURE: IPAM new allocations, %s store, %d callers: %.0f per second, p50 %s, p99 %s%s\n", kind, callers,
				float64(n)/2, lat[len(lat)/2].Round(10*time.Microsecond), lat[len(lat)*99/100].Round(10*time.Microsecond), perAlloc)
		}
	}
}

// allocateFor runs callers that allocate new children for d and returns
// how many were allocated, their latencies and the store's writes meanwhile.
func allocateFor(t *testing.T, st store.Store, trench string, callers int, d time.Duration, writes func() uint64) (int, []time.Duration, uint64) {
	t.Helper()
	e, err := ipam.New(context.Background(), st, ipam.Config{
		Trench: trench, IPv4: &ipam.FamilyConfig{Pool: netip.MustParsePrefix("10.0.0.0/8"), ConduitLength: 12, NodeLength: 24},
		Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	defer e.Close()
	before := writes()
	var mu sync.Mutex
	var lat []time.Duration
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			perNode := max(1, callers/8)
			for n := 0; time.Now().Before(end); n++ {
				start := time.Now()
				node := fmt.Sprintf("w%d-%d", i%8, n*perNode/240)
				_, err := e.Allocate(context.Background(), ipam.Subnet{Trench: trench, Conduit: "c", Node: node, Family: ipam.IPv4}, fmt.Sprintf("c%d-%d", i, n))
				if err != nil {
					t.Errorf("allocate: %v", err)
					return
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return len(lat), lat, writes() - before
}

// cpuTimes is the processor time used so far by the API server, etcd and
// this process.
type cpuTimes struct{ api, etcd, self time.Duration }

func cpuNow(api *apiservertest.Server) cpuTimes {
	var c cpuTimes
	c.api, c.etcd = api.CPU()
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return c
}

func (c cpuTimes) since(before cpuTimes) cpuTimes {
	return cpuTimes{c.api - before.api, c.etcd - before.etcd, c.self - before.self}
}
