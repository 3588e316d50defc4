package bolt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/causeway-net/causeway/internal/fsutil"
	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// Fill writes records into a new store through put.
type Fill func(put func(store.Record) error) error

// buildBatch bounds the records of one transaction of Build: the dirty
// pages of a transaction stay in memory until it commits.
const buildBatch = 1024

// Build creates a new database at path (replacing a file there) with the
// records fill puts. They are written in transactions of buildBatch records
// to the scratch file path.build, in the order fill gives them, then copied
// in key order with full pages (bbolt.Compact) to path, every transaction
// of which is synced: the store is as
// compact as one written in order, whatever the order of fill, and Open
// maps (and checks) no more pages than needed. On error nothing is left.
func Build(path string, fill Fill) error {
	scratch := path + ".build"
	defer os.Remove(scratch)
	if err := build(scratch, fill); err != nil {
		return err
	}
	return compactInto(path, scratch)
}

// compactInto writes a key-ordered copy of the database at src to dst.
func compactInto(dst, src string) (err error) {
	_ = os.Remove(dst)
	from, err := bbolt.Open(src, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer from.Close()
	to, err := bbolt.Open(dst, 0o600, options(time.Second, false))
	if err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	err = bbolt.Compact(to, from, 1<<20)
	if cerr := to.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(dst)
		return fmt.Errorf("compact %s into %s: %w", src, dst, err)
	}
	return nil
}

// build writes the records of fill to a new scratch database at path,
// without fsync: it is only read by compactInto, and rebuilt after a
// crash.
func build(path string, fill Fill) (err error) {
	_ = os.Remove(path)
	opts := options(time.Second, false)
	opts.NoSync = true
	db, err := bbolt.Open(path, 0o600, opts)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close %s: %w", path, cerr)
		}
		if err != nil {
			_ = os.Remove(path)
		}
	}()
	if err := db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{mainBucket, journalBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("create buckets in %s: %w", path, err)
	}
	var batch []store.Record
	flush := func() error {
		err := db.Update(func(tx *bbolt.Tx) error {
			m := tx.Bucket(mainBucket)
			for _, r := range batch {
				v, err := store.EncodeValue(r)
				if err != nil {
					return err
				}
				if err := m.Put(store.EncodeKey(r.Key), v); err != nil {
					return fmt.Errorf("put %v: %w", r.Key, err)
				}
			}
			return nil
		})
		batch = batch[:0]
		return err
	}
	err = fill(func(r store.Record) error {
		batch = append(batch, r)
		if len(batch) >= buildBatch {
			return flush()
		}
		return nil
	})
	if err == nil && len(batch) > 0 {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("build %s: %w", path, err)
	}
	return nil
}

// Converted says what Convert did.
type Converted struct {
	// Aside is where the file that was at the datasource is kept ("" if
	// there was none).
	Aside    string
	Contents Contents
}

// Convert puts a new store, filled by fill, in place of the datasource,
// which no process may hold. The store is built and synced under a
// temporary name (<datasource>.import) and checked; then the file at the
// datasource, if any, gets a second name <datasource>.<what>-<time> (a hard
// link, or a synced copy where links are not possible) and the new store is
// renamed over the datasource. A crash at any point leaves at the
// datasource either the original file or the complete new store. A second
// name that a crashed Convert gave the same file is reused. companions are
// the suffixes of files beside the datasource that belong to the original
// (SQLite's -journal): each gets the second name with its suffix, and is
// removed from beside the new store once it is in place.
func Convert(datasource, what string, companions []string, fill Fill, now time.Time) (Converted, error) {
	var c Converted
	unlock, err := lockExclusive(datasource)
	if err != nil {
		return c, err
	}
	defer unlock()
	tmp := datasource + ".import"
	if err := Build(tmp, fill); err != nil {
		return c, err
	}
	defer os.Remove(tmp) // gone after the rename
	if c.Contents, err = Inspect(tmp); err != nil {
		return c, fmt.Errorf("the new store %s: %w", tmp, err)
	}
	if c.Aside, err = keepAside(datasource, what, companions, now); err != nil {
		return c, err
	}
	if err := renameDurably(tmp, datasource); err != nil {
		return c, fmt.Errorf("put %s in place: %w", datasource, err)
	}
	for _, s := range companions {
		if err := os.Remove(datasource + s); err != nil && !errors.Is(err, os.ErrNotExist) {
			return c, fmt.Errorf("remove %s (kept as %s): %w", datasource+s, c.Aside+s, err)
		}
	}
	return c, nil
}

// keepAside gives the file at path, and its companions, a second name
// next to them and returns it ("" if there is no file).
func keepAside(path, what string, companions []string, now time.Time) (string, error) {
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	prefix := path + "." + what + "-"
	aside := prefix + now.UTC().Format(snapshotTimeFormat)
	if old, _ := filepath.Glob(prefix + "*"); len(old) > 0 {
		for _, o := range old {
			if oi, err := os.Stat(o); err == nil && os.SameFile(info, oi) {
				aside = o
			}
		}
	}
	for _, s := range append([]string{""}, companions...) {
		if err := secondName(path+s, aside+s); err != nil {
			return "", fmt.Errorf("keep %s aside: %w", path+s, err)
		}
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return "", err
	}
	return aside, nil
}

// secondName makes the file at path reachable as name too: a hard link, or
// a synced copy. A missing path, or a name that is already the same file,
// is left as it is.
func secondName(path, name string) error {
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if ni, err := os.Stat(name); err == nil && os.SameFile(info, ni) {
		return nil
	}
	_ = os.Remove(name) // a copy a crash left half done
	if err := os.Link(path, name); err == nil {
		return nil
	}
	tmp := name + ".tmp"
	if err := fsutil.CopyFile(path, tmp); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, name)
}
