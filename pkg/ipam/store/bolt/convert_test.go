package bolt

import (
	"context"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/ipam/store"
)

func collect(t *testing.T, s *Store) []store.Record {
	t.Helper()
	var out []store.Record
	require.NoError(t, s.Each(context.Background(), func(r store.Record) error {
		out = append(out, r)
		return nil
	}))
	return out
}

// TestEachMatchesLoad: Each gives what Load gives, with the journal empty
// (streamed from the main bucket) and not (replayed).
func TestEachMatchesLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	s, err := Open(path, time.Second)
	require.NoError(t, err)
	r := rand.New(rand.NewSource(3))
	for i := 0; i < 50; i++ {
		require.NoError(t, s.Apply(context.Background(), []store.Op{randomOp(r)}))
	}
	want, err := s.Load(context.Background())
	require.NoError(t, err)
	assert.Equal(t, want, collect(t, s), "journal not empty")
	require.NoError(t, s.Close())

	s, err = Open(path, time.Second) // compacts the journal
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, want, collect(t, s), "journal empty")
	stop := errors.New("stop")
	assert.ErrorIs(t, s.Each(context.Background(), func(store.Record) error { return stop }), stop)
}

// TestConvert: the new store replaces the file at the datasource, which is
// kept aside with its companion file; a second name that an interrupted Convert gave it is reused;
// a failing fill leaves everything as it was.
func TestConvert(t *testing.T) {
	dir := t.TempDir()
	ds := filepath.Join(dir, "registry.db")
	require.NoError(t, os.WriteFile(ds, []byte("the original"), 0o600))
	r := rand.New(rand.NewSource(5))
	var recs []store.Record
	for len(recs) < 200 {
		if op := randomOp(r); op.Kind == store.OpPut {
			recs = append(recs, op.Record)
		}
	}
	fill := func(put func(store.Record) error) error {
		for _, rec := range recs {
			if err := put(rec); err != nil {
				return err
			}
		}
		return nil
	}

	// A fill that fails: nothing changes, nothing is left.
	_, err := Convert(ds, "meridio", nil, func(func(store.Record) error) error { return errors.New("read failed") }, time.Now())
	require.Error(t, err)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1)

	require.NoError(t, os.WriteFile(ds+"-journal", []byte("its journal"), 0o600))
	// A crash after the second name was given and before the swap.
	now := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	early, err := keepAside(ds, "meridio", []string{"-journal"}, now.Add(-time.Minute))
	require.NoError(t, err)

	c, err := Convert(ds, "meridio", []string{"-journal"}, fill, now)
	require.NoError(t, err)
	assert.Equal(t, early, c.Aside, "the earlier second name is reused")
	kept, err := os.ReadFile(c.Aside)
	require.NoError(t, err)
	assert.Equal(t, "the original", string(kept))
	kept, err = os.ReadFile(c.Aside + "-journal")
	require.NoError(t, err)
	assert.Equal(t, "its journal", string(kept), "the companion goes with it")
	assert.NoFileExists(t, ds+"-journal", "and is not left beside the new store")
	s, err := Open(ds, time.Second)
	require.NoError(t, err)
	got, err := s.Load(context.Background())
	require.NoError(t, err)
	require.NoError(t, s.Close())
	want := map[string]store.Record{}
	for _, rec := range recs {
		want[string(store.EncodeKey(rec.Key))] = rec
	}
	assert.Len(t, got, len(want))
	for _, g := range got {
		w := want[string(store.EncodeKey(g.Key))]
		assert.True(t, w.Prefix == g.Prefix && w.Updated.Equal(g.Updated), "%v: %v, want %v", g.Key, g, w)
	}
	leftovers, err := filepath.Glob(ds + ".import*")
	require.NoError(t, err)
	assert.Empty(t, leftovers)
}
