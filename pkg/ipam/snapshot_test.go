package ipam

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/ipam/store/bolt"
)

// TestSnapshotOfLiveEngine: a snapshot taken while an engine holds 10,000
// allocations (journal and main bucket both in use) reloads to the same
// addresses; its time is reported.
func TestSnapshotOfLiveEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("10k allocations")
	}
	dir := t.TempDir()
	st, err := bolt.Open(filepath.Join(dir, "registry.db"), time.Second)
	require.NoError(t, err)
	cfg := baseConfig()
	e := newEngine(t, st, cfg)
	type id struct {
		s    Subnet
		name string
	}
	want := make(map[id]string, 10000)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ { // concurrent callers share commits
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 10000; i += 16 {
				k := id{sub(IPv4, fmt.Sprintf("c%d", i%8), fmt.Sprintf("w%d", i/8%10)), fmt.Sprintf("pod-%d-src", i)}
				p, err := e.Allocate(context.Background(), k.s, k.name)
				assert.NoError(t, err)
				mu.Lock()
				want[k] = p.String()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, want, 10000)
	require.NoError(t, e.Sync(context.Background()))
	sn := bolt.Snapshots{Dir: filepath.Join(dir, "snapshots"), Base: "registry.db", Keep: 1}
	start := time.Now()
	path, err := sn.Take(st, start)
	took := time.Since(start)
	require.NoError(t, err)
	info, err := os.Stat(path)
	require.NoError(t, err)
	t.Logf("FIGURE: snapshot of a live engine with 10000 allocations (%d KiB): %v", info.Size()>>10, took.Round(time.Microsecond))

	snap, err := bolt.Open(path, time.Second)
	require.NoError(t, err)
	e2 := newEngine(t, snap, cfg)
	for k, addr := range want {
		got, ok := e2.lookup(k.s, k.name)
		require.True(t, ok, "%v", k)
		assert.Equal(t, addr, got.String()+"/24", "%v", k)
	}
}
