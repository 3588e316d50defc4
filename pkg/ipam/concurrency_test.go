package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
