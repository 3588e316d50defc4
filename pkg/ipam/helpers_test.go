package ipam

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/internal/clock"
	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/bolt"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testTrench = "trench-a"

// newClock is a settable test clock.
func newClock() *clock.Fake { return clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) }

// stores is the set of back ends every engine test runs on. The bolt
// constructor returns a reopenable path-bound store.
var stores = []struct {
	name string
	open func(t *testing.T) func() store.Store
}{
	{"memory", func(t *testing.T) func() store.Store {
		s := memory.New()
		return func() store.Store { return s }
	}},
	{"bolt", func(t *testing.T) func() store.Store {
		path := filepath.Join(t.TempDir(), "sub", "registry.db")
		return func() store.Store {
			s, err := bolt.Open(path, time.Second)
			require.NoError(t, err)
			return s
		}
	}},
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func baseConfig() Config {
	v4, v6 := DefaultIPv4, DefaultIPv6
	return Config{Trench: testTrench, IPv4: &v4, IPv6: &v6, Logger: quietLogger()}
}

// gcConfig is baseConfig on a test clock with a 10-minute GC threshold and
// an interval so long that the loop never fires: tests collect by hand
// (the first collection still runs in New).
func gcConfig() (*clock.Fake, Config) {
	clk := newClock()
	cfg := baseConfig()
	cfg.Clock = clk
	cfg.GCInterval = time.Hour
	cfg.GCThreshold = 10 * time.Minute
	return clk, cfg
}

// newEngine starts an engine on st; it is closed (and st closed, unless it
// is a memory store that the test may reopen) at cleanup.
func newEngine(t *testing.T, st store.Store, cfg Config) *Engine {
	t.Helper()
	e, err := New(context.Background(), st, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		e.Close()
		if _, ok := st.(*memory.Store); !ok {
			_ = st.Close()
		}
	})
	return e
}

func sub(f Family, conduit, node string) Subnet {
	return Subnet{Trench: testTrench, Conduit: conduit, Node: node, Family: f}
}

func alloc(t *testing.T, e *Engine, s Subnet, child string) string {
	t.Helper()
	p, err := e.Allocate(context.Background(), s, child)
	require.NoError(t, err, "allocate %v %s", s, child)
	return p.String()
}

// lookup reads the in-memory index without renewing anything.
func (e *Engine) lookup(s Subnet, childName string) (netip.Addr, bool) {
	t := e.trenches[s.Family]
	t.mu.RLock()
	defer t.mu.RUnlock()
	c := t.conduits[s.Conduit]
	if c == nil {
		return netip.Addr{}, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := c.nodes[s.Node]
	if n == nil {
		return netip.Addr{}, false
	}
	if childName == "" {
		return n.prefix.Addr(), true
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	ch := n.children[childName]
	if ch == nil {
		return netip.Addr{}, false
	}
	return ch.addr, true
}

func (e *Engine) hasConduit(f Family, name string) bool {
	t := e.trenches[f]
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.conduits[name] != nil
}

func (e *Engine) isDraining(f Family, name string) bool {
	t := e.trenches[f]
	t.mu.RLock()
	defer t.mu.RUnlock()
	c := t.conduits[name]
	return c != nil && c.draining
}

// storedKeys lists the stored keys (for "nothing changed" assertions).
func storedKeys(t *testing.T, st store.Store) []string {
	t.Helper()
	recs, err := st.Load(context.Background())
	require.NoError(t, err)
	var out []string
	for _, r := range recs {
		out = append(out, string(store.EncodeKey(r.Key))+"="+r.Prefix.String())
	}
	return out
}
