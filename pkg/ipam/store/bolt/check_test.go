package bolt

import (
	"context"
	"fmt"
	"math/rand"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// filledStore writes n child records (in batches, compacted into the main
// bucket) and closes the store; it returns the file's path.
func filledStore(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "registry.db")
	s, err := Open(path, time.Second)
	require.NoError(t, err)
	var ops []store.Op
	for i := 0; i < n; i++ {
		ops = append(ops, store.Op{Kind: store.OpPut, Record: store.Record{
			Key:    store.Key{Level: store.LevelChild, Trench: "t", Family: 4, Conduit: "c", Node: fmt.Sprintf("n%d", i%7), Child: fmt.Sprintf("pod-%d-src", i)},
			Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32), Updated: time.Unix(int64(i), 0),
		}})
	}
	require.NoError(t, s.Apply(context.Background(), ops))
	require.NoError(t, s.compact())
	require.NoError(t, s.Close())
	return path
}

func requireDamaged(t *testing.T, path, problem string) {
	t.Helper()
	s, err := Open(path, time.Second)
	if err == nil {
		_ = s.Close()
	}
	var d *DamagedError
	require.ErrorAs(t, err, &d)
	assert.Equal(t, path, d.Path)
	assert.Contains(t, d.Problem, problem)
	assert.ErrorAs(t, Check(path), &d, "Check agrees with Open")
}

func TestOpenCreatesOnlyAMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "registry.db")
	s, err := Open(path, time.Second)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = os.Stat(path + ".new")
	assert.ErrorIs(t, err, os.ErrNotExist, "the temporary file is renamed away")
	require.NoError(t, Check(path))

	empty := filepath.Join(t.TempDir(), "empty.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	requireDamaged(t, empty, "empty file, 0 bytes")
	info, err := os.Stat(empty)
	require.NoError(t, err)
	assert.Zero(t, info.Size(), "a refused file is left untouched")
}

func TestOpenRefusesTruncatedFile(t *testing.T) {
	path := filledStore(t, 3000)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, info.Size()/2))
	requireDamaged(t, path, "truncated")
	require.NoError(t, os.Truncate(path, 100))
	requireDamaged(t, path, "truncated")
}

func TestOpenRefusesForeignFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.db")
	require.NoError(t, os.WriteFile(path, []byte("SQLite format 3\x00 and so on, for a few pages"), 0o600))
	requireDamaged(t, path, "not a bbolt database")
}

// TestOpenNeverPanicsOnCorruptPages overwrites each page of a real store in
// turn (random bytes, zeros, a wrong page id) and opens it: every open
// either succeeds (the page was free) and loads, or fails with a
// *DamagedError; none panics or faults.
func TestOpenNeverPanicsOnCorruptPages(t *testing.T) {
	orig := filledStore(t, 3000)
	data, err := os.ReadFile(orig)
	require.NoError(t, err)
	const ps = 4096
	m, err := chooseMeta(bytesReaderAt(data), int64(len(data)))
	require.NoError(t, err)
	require.EqualValues(t, ps, m.pageSize)
	r := rand.New(rand.NewSource(1))
	path := filepath.Join(t.TempDir(), "registry.db")
	refused := 0
	for page := 0; page < int(m.hwm); page++ {
		for _, how := range []string{"random", "zeros", "id"} {
			bad := append([]byte(nil), data...)
			p := bad[page*ps : (page+1)*ps]
			switch how {
			case "random":
				r.Read(p)
			case "zeros":
				clear(p)
			case "id":
				p[0] ^= 0x5a
			}
			require.NoError(t, os.WriteFile(path, bad, 0o600))
			s, err := Open(path, time.Second)
			if err != nil {
				var d *DamagedError
				require.ErrorAs(t, err, &d, "page %d %s", page, how)
				refused++
				continue
			}
			_, err = s.Load(context.Background())
			assert.NoError(t, err, "page %d %s: opened, so it loads", page, how)
			require.NoError(t, s.Close())
		}
	}
	t.Logf("%d pages in use, %d of %d corruptions refused", m.hwm, refused, 3*m.hwm)
	assert.Positive(t, refused)
}

type bytesReaderAt []byte

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, fmt.Errorf("EOF")
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, fmt.Errorf("EOF")
	}
	return n, nil
}

// TestSnapshotRestoreAndCheckFigures reports, for a store of 10,000 child
// allocations, the time of a snapshot, of the check an open does, and of a
// restore; the snapshot and the restored file load the same records.
func TestSnapshotRestoreAndCheckFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("10k records")
	}
	path := filledStore(t, 10000)
	s, err := Open(path, time.Second)
	require.NoError(t, err)
	want, err := s.Load(context.Background())
	require.NoError(t, err)
	sn := Snapshots{Dir: filepath.Join(t.TempDir(), "snapshots"), Base: filepath.Base(path), Keep: 2}
	start := time.Now()
	snap, err := sn.Take(s, start)
	took := time.Since(start)
	require.NoError(t, err)
	for i := 1; i <= 3; i++ {
		_, err := sn.Take(s, start.Add(time.Duration(i)*time.Second))
		require.NoError(t, err)
	}
	list, err := sn.List()
	require.NoError(t, err)
	require.Len(t, list, 2, "Keep newest")
	assert.True(t, list[0].Time.After(list[1].Time), "newest first")
	require.NoError(t, s.Close())
	info, err := os.Stat(list[0].Path)
	require.NoError(t, err)
	t.Logf("FIGURE: snapshot of a store of 10000 allocations (%d KiB): %v", info.Size()>>10, took.Round(time.Microsecond))
	_, err = os.Stat(snap)
	assert.ErrorIs(t, err, os.ErrNotExist, "the oldest pruned")

	start = time.Now()
	require.NoError(t, Check(path))
	t.Logf("FIGURE: check of a store of 10000 allocations (as at open): %v", time.Since(start).Round(time.Microsecond))

	require.NoError(t, os.Truncate(path, 8192*3))
	start = time.Now()
	r, err := Restore(path, list[0].Path, time.Now())
	require.NoError(t, err)
	t.Logf("FIGURE: restore of a snapshot of 10000 allocations (checks included): %v", time.Since(start).Round(time.Microsecond))
	assert.True(t, r.AsideDamaged)
	assert.Equal(t, 10000, r.Contents.Children)
	s, err = Open(path, time.Second)
	require.NoError(t, err)
	got, err := s.Load(context.Background())
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.Equal(t, want, got)
}

// TestOpenNeverPanicsOnRandomDamage flips random bytes anywhere in small
// (inline buckets) and larger stores, or cuts them at a random length:
// every open succeeds or fails with a *DamagedError, and an opened store
// loads or reports damage; nothing panics or faults.
func TestOpenNeverPanicsOnRandomDamage(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	path := filepath.Join(t.TempDir(), "registry.db")
	for _, n := range []int{3, 400} {
		data, err := os.ReadFile(filledStore(t, n))
		require.NoError(t, err)
		refused := 0
		for round := 0; round < 300; round++ {
			bad := append([]byte(nil), data...)
			if round%10 == 9 {
				bad = bad[:r.Intn(len(bad))]
			} else {
				for k := 0; k <= r.Intn(8); k++ {
					bad[r.Intn(len(bad))] ^= byte(1 + r.Intn(255))
				}
			}
			require.NoError(t, os.WriteFile(path, bad, 0o600))
			s, err := Open(path, time.Second)
			var d *DamagedError
			if err != nil {
				require.ErrorAs(t, err, &d, "round %d", round)
				refused++
				continue
			}
			if _, err := s.Load(context.Background()); err != nil {
				require.ErrorAs(t, err, &d, "round %d", round)
			}
			require.NoError(t, s.Close())
		}
		t.Logf("%d records: %d of 300 damaged copies refused (the others hit free space or values that still decode)", n, refused)
	}
}

// TestOpenSurvivesOneTornHeader: one header (meta) page with a bad checksum
// is what a crash in the middle of a commit can leave; bbolt uses the other,
// and so does the check.
func TestOpenSurvivesOneTornHeader(t *testing.T) {
	path := filledStore(t, 100)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, page := range []int{0, 1} {
		bad := append([]byte(nil), data...)
		bad[page*4096+pageHeaderSize+48] ^= 0xff // txid: the checksum no longer matches
		require.NoError(t, os.WriteFile(path, bad, 0o600))
		s, err := Open(path, time.Second)
		require.NoError(t, err, "header page %d torn", page)
		_, err = s.Load(context.Background())
		assert.NoError(t, err)
		require.NoError(t, s.Close())
	}
}

// TestSnapshotOfDamagedStoreIsRefused: pages damaged under a running store
// make the snapshot fail, and the good snapshots are kept.
func TestSnapshotOfDamagedStoreIsRefused(t *testing.T) {
	path := filledStore(t, 3000)
	s, err := Open(path, time.Second)
	require.NoError(t, err)
	defer s.Close()
	sn := Snapshots{Dir: filepath.Join(t.TempDir(), "snapshots"), Base: "registry.db", Keep: 1}
	good, err := sn.Take(s, time.Now())
	require.NoError(t, err)

	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	data := mustRead(t, path)
	m, err := chooseMeta(bytesReaderAt(data), int64(len(data)))
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xde, 0xad}, int64(m.root)*4096) // the root page claims another id
	require.NoError(t, err)
	require.NoError(t, f.Close())

	_, err = sn.Take(s, time.Now().Add(time.Second))
	var d *DamagedError
	require.ErrorAs(t, err, &d)
	list, err := sn.List()
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, good, list[0].Path, "the good snapshot is kept")
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func TestSnapshotAtParsesTakeNames(t *testing.T) {
	at := time.Date(2026, 12, 1, 8, 15, 0, 123e6, time.UTC)
	got := SnapshotAt("/x/registry.v2.db." + at.Format(snapshotTimeFormat) + ".snapshot")
	assert.True(t, at.Equal(got.Time), "%v", got.Time)
	assert.True(t, SnapshotAt("/x/copy-of-something").Time.IsZero())
}
