package meridio_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/internal/clock"
	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/meridio"
	"github.com/causeway-net/causeway/pkg/ipam/meridio/meridiotest"
	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2026, 12, 1, 6, 55, 22, 324375271, time.UTC)

// importInto reads the database at path into a new memory store.
func importInto(t *testing.T, path string, opts meridio.Options) (*memory.Store, *meridio.Summary) {
	t.Helper()
	st := memory.New()
	sum, err := meridio.Read(context.Background(), path, opts, func(r store.Record) error {
		return st.Apply(context.Background(), []store.Op{{Kind: store.OpPut, Record: r}})
	})
	require.NoError(t, err)
	return st, sum
}

// nowClock is the real clock with its time taken from now.
type nowClock struct {
	clock.Clock
	now func() time.Time
}

func (c nowClock) Now() time.Time { return c.now() }

// engine starts an engine of trench on st with the configured geometries
// and clock now.
func engine(t *testing.T, st store.Store, trench string, v4, v6 *ipam.FamilyConfig, now func() time.Time, gc time.Duration) *ipam.Engine {
	t.Helper()
	cfg := ipam.Config{Trench: trench, IPv4: v4, IPv6: v6, Clock: nowClock{clock.Real(), now}, LeaseFlushInterval: time.Hour}
	if gc > 0 {
		cfg.GCInterval, cfg.GCThreshold = time.Hour, gc
	}
	e, err := ipam.New(context.Background(), st, cfg)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e
}

func subnet(c meridiotest.Child) ipam.Subnet {
	f := ipam.IPv4
	if c.IPv6 {
		f = ipam.IPv6
	}
	return ipam.Subnet{Trench: c.Trench, Conduit: c.Conduit, Node: c.Node, Family: f}
}

// TestImportKeepsEveryAddress: IPv4, IPv6 and dual stack, several
// trenches: every known child gets its old address back, new children
// never collide with imported ones, and the stored geometry wins over a
// different configuration.
func TestImportKeepsEveryAddress(t *testing.T) {
	for _, tc := range []struct {
		name   string
		v4, v6 bool
	}{{"ipv4", true, false}, {"ipv6", false, true}, {"dualstack", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "registry.db")
			w := meridiotest.Create(t, path)
			var kids []meridiotest.Child
			for i, trench := range []string{"trench-a", "trench-b"} {
				if tc.v4 {
					kids = append(kids, w.Populate(meridiotest.Spec{Trench: trench, Pool: fmt.Sprintf("172.%d.0.0/16", 16+i), ConduitLength: 20, NodeLength: 24,
						Conduits: 3, Nodes: 4, Children: 21, Updated: t0})...)
				}
				if tc.v6 {
					kids = append(kids, w.Populate(meridiotest.Spec{Trench: trench, IPv6: true, Pool: fmt.Sprintf("fd0%d::/48", i), ConduitLength: 56, NodeLength: 64,
						Conduits: 3, Nodes: 4, Children: 21, Updated: t0})...)
				}
			}
			w.Close()
			// The environment says otherwise: the stored pools win.
			v4 := &ipam.FamilyConfig{Pool: netip.MustParsePrefix("169.255.0.0/16"), ConduitLength: 18, NodeLength: 26}
			v6 := &ipam.FamilyConfig{Pool: netip.MustParsePrefix("fd99::/48"), ConduitLength: 52, NodeLength: 60}
			st, sum := importInto(t, path, meridio.Options{IPv4: v4, IPv6: v6})
			conduits, nodes, children := sum.Totals()
			fams := 0
			for _, on := range []bool{tc.v4, tc.v6} {
				if on {
					fams++
				}
			}
			assert.Equal(t, 2*fams, len(sum.Trenches))
			assert.Equal(t, 2*fams*3, conduits)
			assert.Equal(t, 2*fams*3*4, nodes)
			assert.Equal(t, len(kids), children)
			assert.Zero(t, sum.Skipped, "%+v", sum.SkippedRows)
			assert.Equal(t, t0, sum.Heartbeat)
			for _, tr := range sum.Trenches {
				assert.True(t, tr.StoredConduitLength && tr.StoredNodeLength)
			}

			for _, trench := range []string{"trench-a", "trench-b"} {
				var cv4, cv6 *ipam.FamilyConfig
				if tc.v4 {
					cv4 = v4
				}
				if tc.v6 {
					cv6 = v6
				}
				e := engine(t, st, trench, cv4, cv6, func() time.Time { return t0.Add(time.Minute) }, 40*time.Minute)
				taken := map[netip.Addr]string{}
				for _, c := range kids {
					if c.Trench != trench {
						continue
					}
					p, err := e.Allocate(context.Background(), subnet(c), c.Name)
					require.NoError(t, err)
					assert.Equal(t, netip.PrefixFrom(c.Addr, c.NodeLength), p, "%+v", c)
					taken[c.Addr] = c.Name
				}
				for _, c := range kids {
					if c.Trench != trench || c.Name != "bridge" {
						continue
					}
					for i := 0; i < 20; i++ {
						name := fmt.Sprintf("new-%d", i)
						p, err := e.Allocate(context.Background(), subnet(c), name)
						require.NoError(t, err)
						prev, dup := taken[p.Addr()]
						require.False(t, dup, "%s got %s, held by %s", name, p.Addr(), prev)
						taken[p.Addr()] = name
					}
				}
				e.Close()
			}
		})
	}
}

// TestImportReleasedAndFull: a child Meridio released is gone (its address
// is handed out again), a node full to its last address stays full, and a
// child Released after the import frees its address.
func TestImportReleasedAndFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	w := meridiotest.Create(t, path)
	root := w.Trench("t", 0, "10.0.0.0/24")
	c := w.Add(root, "c", "10.0.0.0/28", time.Time{}, false)
	full := w.Add(c, "full", "10.0.0.0/30", t0, true) // 2 usable addresses: .1 .2
	w.Add(full, "bridge", "10.0.0.1/32", t0, false)
	w.Add(full, "a-src", "10.0.0.2/32", t0, true)
	holes := w.Add(c, "holes", "10.0.0.4/30", t0, true)
	w.Add(holes, "bridge", "10.0.0.5/32", t0, false) // .6 was released by Meridio
	w.Close()

	st, sum := importInto(t, path, meridio.Options{})
	assert.Equal(t, 30, sum.Trenches[0].Geometry.NodeLength)
	e := engine(t, st, "t", &ipam.FamilyConfig{Pool: netip.MustParsePrefix("10.0.0.0/24"), ConduitLength: 28, NodeLength: 30}, nil,
		func() time.Time { return t0 }, 0)
	ctx := context.Background()
	s := func(node string) ipam.Subnet {
		return ipam.Subnet{Trench: "t", Conduit: "c", Node: node, Family: ipam.IPv4}
	}

	p, err := e.Allocate(ctx, s("full"), "a-src")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.2/30", p.String())
	_, err = e.Allocate(ctx, s("full"), "b-src")
	assert.ErrorIs(t, err, ipam.ErrExhausted, "the full node stays full")

	p, err = e.Allocate(ctx, s("holes"), "new-src")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.6/30", p.String(), "the released child's address is free")

	require.NoError(t, e.Release(ctx, s("full"), "a-src"))
	p, err = e.Allocate(ctx, s("full"), "b-src")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.2/30", p.String(), "released after the import: free again")
}

// TestImportLeaseTimes: lease times carry over and the GC sees them: a
// child renewed more than the threshold before the newest lease is
// collected at the first start, the others keep their stored time.
func TestImportLeaseTimes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	w := meridiotest.Create(t, path)
	root := w.Trench("t", 0, "172.16.0.0/16")
	c := w.Add(root, "c", "172.16.0.0/20", time.Time{}, false)
	n := w.Add(c, "n", "172.16.0.0/24", t0, true)
	w.Add(n, "bridge", "172.16.0.1/32", t0.Add(-3*time.Hour), false)
	w.Add(n, "fresh-src", "172.16.0.2/32", t0.Add(-10*time.Minute), true)
	w.Add(n, "stale-src", "172.16.0.3/32", t0.Add(-2*time.Hour), true)
	w.Add(n, "old-src", "172.16.0.4/32", t0.Add(-2*time.Hour), false) // not expirable: Meridio renews it at start
	w.Add(n, "newest-src", "172.16.0.5/32", t0, true)
	w.Close()

	st, sum := importInto(t, path, meridio.Options{})
	assert.Equal(t, t0, sum.Heartbeat)
	assert.Equal(t, 1, sum.Renewed)
	leases := func() map[string]time.Time {
		recs, err := st.Load(context.Background())
		require.NoError(t, err)
		out := map[string]time.Time{}
		for _, r := range recs {
			if r.Key.Level == store.LevelChild {
				out[r.Key.Child] = r.Updated
			}
		}
		return out
	}
	assert.Equal(t, map[string]time.Time{
		"bridge": t0.Add(-3 * time.Hour), "fresh-src": t0.Add(-10 * time.Minute), "stale-src": t0.Add(-2 * time.Hour),
		"old-src": t0, "newest-src": t0,
	}, leases(), "imported lease times")

	// The IPAM starts at the newest lease (no downtime to credit) with
	// Meridio's threshold: only the stale child goes.
	e := engine(t, st, "t", &ipam.DefaultIPv4, nil, func() time.Time { return t0 }, 40*time.Minute)
	e.Close()
	got := leases()
	assert.NotContains(t, got, "stale-src")
	for _, k := range []string{"bridge", "fresh-src", "old-src", "newest-src"} {
		assert.Contains(t, got, k)
	}
}

// TestImportOddNames: names that are unusual but valid are kept as they
// are; rows the engine could not serve are skipped and reported.
func TestImportOddNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	w := meridiotest.Create(t, path)
	long := ""
	for len(long) < 253 {
		long += "n"
	}
	root := w.Trench("a-1-0", 0, "172.16.0.0/16") // a trench name ending like a family
	c := w.Add(root, "0", "172.16.0.0/20", time.Time{}, false)
	n1 := w.Add(c, "", "172.16.0.0/24", t0, true) // proxies without NSM_HOST
	w.Add(n1, "bridge", "172.16.0.1/32", t0, false)
	w.Add(n1, "bridge-x-1-src", "172.16.0.2/32", t0, true)
	n2 := w.Add(c, long, "172.16.1.0/24", t0, true)
	w.Add(n2, "UPPER.case_and~tilde-dst", "172.16.1.7/32", t0, true)
	w.Add(n2, "with space", "172.16.1.8/32", t0, true)              // skipped: not a valid name
	w.Add(n2, "network-src", "172.16.1.0/32", t0, true)             // skipped: reserved
	w.Add(n2, "outside-src", "172.16.9.9/32", t0, true)             // skipped: outside its node
	w.Row("orphan", "orphan", "172.16.3.3/32", "nowhere", t0, true) // skipped: no parent
	w.Close()

	st, sum := importInto(t, path, meridio.Options{})
	require.Len(t, sum.Trenches, 1)
	assert.Equal(t, "a-1-0", sum.Trenches[0].Name)
	assert.Equal(t, 4, sum.Skipped, "%+v", sum.SkippedRows)
	_, _, children := sum.Totals()
	assert.Equal(t, 3, children)

	e := engine(t, st, "a-1-0", &ipam.DefaultIPv4, nil, func() time.Time { return t0 }, 0)
	for _, x := range []struct{ node, child, want string }{
		{"", "bridge", "172.16.0.1/24"}, {"", "bridge-x-1-src", "172.16.0.2/24"}, {long, "UPPER.case_and~tilde-dst", "172.16.1.7/24"},
	} {
		p, err := e.Allocate(context.Background(), ipam.Subnet{Trench: "a-1-0", Conduit: "0", Node: x.node, Family: ipam.IPv4}, x.child)
		require.NoError(t, err)
		assert.Equal(t, x.want, p.String(), x.child)
	}
}

// TestImportEmpty: a database with the schema only, and one with trench
// roots only, import to nothing and to the pools (with the configured
// lengths).
func TestImportEmpty(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	meridiotest.Create(t, empty).Close()
	_, sum := importInto(t, empty, meridio.Options{})
	assert.Empty(t, sum.Trenches)

	roots := filepath.Join(dir, "roots.db")
	w := meridiotest.Create(t, roots)
	w.Trench("default", 0, "172.16.0.0/16")
	w.Trench("default", 1, "fd00::/48")
	w.Close()
	st, sum := importInto(t, roots, meridio.Options{IPv4: &ipam.FamilyConfig{Pool: netip.MustParsePrefix("10.0.0.0/8"), ConduitLength: 20, NodeLength: 24}})
	require.Len(t, sum.Trenches, 2)
	assert.Equal(t, "172.16.0.0/16", sum.Trenches[0].Geometry.Pool.String())
	assert.False(t, sum.Trenches[0].StoredConduitLength)
	e := engine(t, st, "default", &ipam.DefaultIPv4, &ipam.DefaultIPv6, time.Now, 0)
	p, err := e.Allocate(context.Background(), ipam.Subnet{Trench: "default", Conduit: "c", Node: "n", Family: ipam.IPv4}, "bridge")
	require.NoError(t, err)
	assert.Equal(t, "172.16.0.1/24", p.String(), "carved in the stored pool")
}

// TestRefused: files that are not a readable Meridio database are refused
// with what was found and what is expected, before anything is emitted.
func TestRefused(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	w := meridiotest.Create(t, good)
	w.Populate(meridiotest.Spec{Trench: "t", Pool: "172.16.0.0/16", ConduitLength: 20, NodeLength: 24, Conduits: 4, Nodes: 8, Children: 60, Updated: t0})
	w.Close()
	data, err := os.ReadFile(good)
	require.NoError(t, err)

	other := filepath.Join(dir, "other.db")
	ow := meridiotest.Create(t, other)
	ow.Close()
	renameTable(t, other)

	truncated := filepath.Join(dir, "truncated.db")
	require.NoError(t, os.WriteFile(truncated, data[:len(data)/2], 0o600))
	garbled := filepath.Join(dir, "garbled.db")
	g := append([]byte{}, data...)
	for i := 4096; i < len(g); i += 7 {
		g[i] ^= 0x5a
	}
	require.NoError(t, os.WriteFile(garbled, g, 0o600))

	for _, tc := range []struct {
		path, want string
		foreign    bool
	}{
		{other, "found a SQLite database with the tables users but no table prefixes", true},
		{truncated, "damaged", false},
		{garbled, "damaged", false},
	} {
		emitted := 0
		_, err := meridio.Read(context.Background(), tc.path, meridio.Options{}, func(store.Record) error { emitted++; return nil })
		require.Error(t, err, tc.path)
		t.Logf("%s: %v", filepath.Base(tc.path), err)
		assert.Contains(t, err.Error(), tc.want)
		assert.Contains(t, err.Error(), meridio.Expected)
		var f *meridio.ForeignError
		var d *meridio.DamagedError
		if tc.foreign {
			assert.ErrorAs(t, err, &f)
		} else {
			assert.ErrorAs(t, err, &d)
		}
		assert.Zero(t, emitted, "nothing emitted")
	}
	ok, err := meridio.IsSQLite(good)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = meridio.IsSQLite(filepath.Join(dir, "missing"))
	require.NoError(t, err)
	assert.False(t, ok)
}

// renameTable turns a database into another application's: its only table
// is users.
func renameTable(t *testing.T, path string) {
	t.Helper()
	w := meridiotest.Open(t, path)
	w.Exec("DROP TABLE prefixes; CREATE TABLE users (id integer, email text)")
	w.Close()
}

// TestHelperKilledWriter is not a test: run by TestImportHotJournal in a
// process of its own, it writes to the database named by
// MERIDIO_TEST_KILLED_WRITER and kills itself before committing, as a
// Meridio IPAM killed in the middle of a write does.
func TestHelperKilledWriter(t *testing.T) {
	path := os.Getenv("MERIDIO_TEST_KILLED_WRITER")
	if path == "" {
		t.Skip("helper process only")
	}
	w := meridiotest.Open(t, path+"?_pragma=cache_size(10)")
	for i := 0; i < 5000; i++ {
		w.Exec(fmt.Sprintf("DELETE FROM prefixes WHERE rowid = %d; INSERT INTO prefixes (id, name, cidr, parent_id) VALUES ('junk-%d', 'junk', '10.9.9.9/32', 'nowhere')", i, i))
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

// TestImportHotJournal: a database whose last writer was killed mid-write
// (a hot journal beside it) is read as committed, from a recovered copy;
// the original and its journal are not touched, no copy is left.
func TestImportHotJournal(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "registry.db")
	w := meridiotest.Create(t, path)
	kids := w.Populate(meridiotest.Spec{Trench: "t", Pool: "172.16.0.0/16", ConduitLength: 20, NodeLength: 24,
		Conduits: 2, Nodes: 4, Children: 100, Updated: t0})
	w.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperKilledWriter$")
	cmd.Env = append(os.Environ(), "MERIDIO_TEST_KILLED_WRITER="+path)
	require.Error(t, cmd.Run(), "the writer is killed")
	journal, err := os.ReadFile(path + "-journal")
	require.NoError(t, err, "a hot journal is left")
	require.NotEmpty(t, journal)
	db, err := os.ReadFile(path)
	require.NoError(t, err)

	_, sum := importInto(t, path, meridio.Options{})
	_, _, children := sum.Totals()
	assert.Equal(t, len(kids), children, "what was committed, all of it")
	assert.Zero(t, sum.Skipped)

	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, db, after, "the original is not written")
	j, err := os.ReadFile(path + "-journal")
	require.NoError(t, err)
	assert.Equal(t, journal, j, "nor its journal")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "no copy left")
}
