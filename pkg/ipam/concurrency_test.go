package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
)

// TestConcurrentAllocations: 64 goroutines allocating 100 distinct children
// each, all in one node and then each in its own node; every address is
// unique and every repeated Allocate returns the same address.
func TestConcurrentAllocations(t *testing.T) {
	const workers, perWorker = 64, 100
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.IPv4 = &FamilyConfig{Pool: netip.MustParsePrefix("10.0.0.0/8"), ConduitLength: 9, NodeLength: 16}
			e := newEngine(t, sc.open(t)(), cfg)
			for _, layout := range []struct {
				name string
				node func(w int) string
			}{
				{"one node", func(int) string { return "w-shared" }},
				{"node per worker", func(w int) string { return fmt.Sprintf("w-%d", w) }},
			} {
				t.Run(layout.name, func(t *testing.T) {
					for _, f := range []Family{IPv4, IPv6} {
						got := make([][]netip.Prefix, workers)
						var wg sync.WaitGroup
						errs := make(chan error, workers)
						for w := 0; w < workers; w++ {
							wg.Add(1)
							go func() {
								defer wg.Done()
								s := sub(f, "c-"+layout.name[:3], layout.node(w))
								for i := 0; i < perWorker; i++ {
									p, err := e.Allocate(context.Background(), s, fmt.Sprintf("g%d-c%d", w, i))
									if err != nil {
										errs <- err
										return
									}
									got[w] = append(got[w], p)
								}
								// Repeat: every one comes back unchanged.
								for i := 0; i < perWorker; i++ {
									p, err := e.Allocate(context.Background(), s, fmt.Sprintf("g%d-c%d", w, i))
									if err != nil {
										errs <- err
										return
									}
									if p != got[w][i] {
										errs <- fmt.Errorf("worker %d child %d: %s then %s", w, i, got[w][i], p)
										return
									}
								}
							}()
						}
						wg.Wait()
						close(errs)
						for err := range errs {
							require.NoError(t, err)
						}
						seen := map[netip.Addr]bool{}
						for _, ps := range got {
							require.Len(t, ps, perWorker)
							for _, p := range ps {
								assert.False(t, seen[p.Addr()], "address %s handed out twice", p)
								seen[p.Addr()] = true
							}
						}
						assert.Len(t, seen, workers*perWorker)
					}
				})
			}
		})
	}
}

// TestRenewalRacingGC: renewals race with the collector, in rounds where
// every child is stale; every child whose renewal succeeded must still hold
// the address that renewal returned (the clock stands still in a round).
func TestRenewalRacingGC(t *testing.T) {
	clk, cfg := gcConfig()
	e := newEngine(t, memory.New(), cfg)
	const nodes, perNode, workers = 16, 40, 4
	name := func(i int) (Subnet, string) {
		return sub(IPv6, "c1", fmt.Sprintf("w%d", i%nodes)), fmt.Sprintf("x%d", i)
	}
	for round := 0; round < 20; round++ {
		for i := 0; i < nodes*perNode; i++ {
			s, n := name(i)
			alloc(t, e, s, n)
		}
		clk.Advance(11 * time.Minute)
		for i := 0; i < nodes; i++ {
			s, _ := name(i)
			alloc(t, e, s, "bridge") // keeps the nodes
		}
		var mu sync.Mutex
		last := map[int]netip.Prefix{}
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			e.CollectGarbage()
		}()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := nodes*perNode - 1 - w; i >= 0; i -= workers {
					s, n := name(i)
					if p, err := e.Allocate(context.Background(), s, n); err == nil {
						mu.Lock()
						last[i] = p
						mu.Unlock()
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		for i, p := range last {
			s, n := name(i)
			a, ok := e.lookup(s, n)
			require.True(t, ok, "round %d: %s was renewed, then collected", round, n)
			require.Equal(t, p.Addr(), a, n)
		}
	}
}
