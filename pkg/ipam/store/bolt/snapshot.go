package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/causeway-net/causeway/internal/fsutil"
	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// Snapshot writes a consistent copy of the database (one read transaction:
// what is committed, journal included) to path: to a temporary file first,
// synced and checked (as Check: a copy of damaged pages is no snapshot, and
// must not push a good one out), then renamed into place with its directory
// synced. It does not block Apply.
func (s *Store) Snapshot(path string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		_, err := tx.WriteTo(f)
		return err
	})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = Check(tmp)
	}
	if err == nil {
		err = renameDurably(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("snapshot to %s: %w", path, err)
	}
	return nil
}

// Snapshots are the kept snapshots of one database: files named
// <Base>.<UTC time>.snapshot in Dir.
type Snapshots struct {
	Dir  string
	Base string // the database file's name, e.g. registry.db
	// Keep is how many Take keeps (the newest).
	Keep int
}

// SnapshotFile is one kept snapshot.
type SnapshotFile struct {
	Path string
	Time time.Time // when it was taken (from its name)
}

const (
	snapshotSuffix     = ".snapshot"
	snapshotTimeFormat = "20060102T150405.000Z"
)

// Take writes a snapshot of s taken at now and removes all but the newest
// Keep. It returns the new snapshot's path.
func (sn Snapshots) Take(s *Store, now time.Time) (string, error) {
	if err := os.MkdirAll(sn.Dir, 0o750); err != nil {
		return "", fmt.Errorf("snapshot directory: %w", err)
	}
	path := filepath.Join(sn.Dir, sn.Base+"."+now.UTC().Format(snapshotTimeFormat)+snapshotSuffix)
	if err := s.Snapshot(path); err != nil {
		return "", err
	}
	return path, sn.prune()
}

// prune removes all but the newest Keep snapshots, and the temporary files
// of snapshots that a crash interrupted.
func (sn Snapshots) prune() error {
	list, err := sn.List()
	if err != nil {
		return err
	}
	var errs []error
	if torn, err := filepath.Glob(filepath.Join(sn.Dir, sn.Base+".*"+snapshotSuffix+".tmp")); err == nil {
		for _, p := range torn {
			errs = append(errs, os.Remove(p))
		}
	}
	for _, old := range list[min(len(list), max(sn.Keep, 1)):] {
		if err := os.Remove(old.Path); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// List returns the snapshots in Dir, newest first. A missing Dir has none.
func (sn Snapshots) List() ([]SnapshotFile, error) {
	entries, err := os.ReadDir(sn.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var out []SnapshotFile
	for _, e := range entries {
		t, ok := snapshotTime(e.Name(), sn.Base)
		if !ok || e.IsDir() {
			continue
		}
		out = append(out, SnapshotFile{Path: filepath.Join(sn.Dir, e.Name()), Time: t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Time.After(out[j].Time) })
	return out, nil
}

// SnapshotAt names the snapshot file at path, with its time if its name
// has one (as Take names them).
func SnapshotAt(path string) SnapshotFile {
	name := filepath.Base(path)
	for i := 1; i < len(name); i++ { // the base name may hold dots too
		if name[i] == '.' {
			if t, ok := snapshotTime(name, name[:i]); ok {
				return SnapshotFile{Path: path, Time: t}
			}
		}
	}
	return SnapshotFile{Path: path}
}

// snapshotTime parses the time of a snapshot named <base>.<time>.snapshot.
func snapshotTime(name, base string) (time.Time, bool) {
	stamp, ok := strings.CutPrefix(name, base+".")
	if !ok {
		return time.Time{}, false
	}
	if stamp, ok = strings.CutSuffix(stamp, snapshotSuffix); !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(snapshotTimeFormat, stamp)
	return t, err == nil
}

// Contents summarizes a checked database file.
type Contents struct {
	Conduits, Nodes, Children int
}

// Inspect checks the file at path (as Check) and counts what it holds.
func Inspect(path string) (Contents, error) {
	if _, err := os.Stat(path); err != nil {
		return Contents{}, err
	}
	db, err := openChecked(path, time.Second, true)
	if err != nil {
		return Contents{}, err
	}
	s := &Store{db: db, path: path}
	defer db.Close()
	recs, err := s.Load(context.Background())
	if err != nil {
		return Contents{}, err
	}
	var c Contents
	for _, r := range recs {
		switch r.Key.Level {
		case store.LevelConduit:
			c.Conduits++
		case store.LevelNode:
			c.Nodes++
		case store.LevelChild:
			c.Children++
		}
	}
	return c, nil
}

// Restored says what Restore did.
type Restored struct {
	// Aside is where the file that was at the datasource now is ("" if
	// there was none); AsideDamaged says whether it was damaged.
	Aside        string
	AsideDamaged bool
	Contents     Contents
}

// Restore puts the snapshot at from in place of the database at
// datasource, which no process may hold. The snapshot is checked first and
// the copy after. A file at datasource is kept aside, next to it, as
// <datasource>.damaged-<time> or, if it checks, .replaced-<time>.
func Restore(datasource, from string, now time.Time) (Restored, error) {
	var r Restored
	contents, err := Inspect(from)
	if err != nil {
		return r, fmt.Errorf("snapshot %s: %w", from, err)
	}
	r.Contents = contents
	unlock, err := lockExclusive(datasource)
	if err != nil {
		return r, err
	}
	defer unlock()

	tmp := datasource + ".restore"
	if err := fsutil.CopyFile(from, tmp); err != nil {
		return r, err
	}
	defer os.Remove(tmp) // gone after the rename
	if err := Check(tmp); err != nil {
		return r, fmt.Errorf("the copy of %s: %w", from, err)
	}
	if _, err := os.Stat(datasource); err == nil {
		var d *DamagedError
		r.AsideDamaged = errors.As(checkFile(datasource), &d)
		what := "replaced"
		if r.AsideDamaged {
			what = "damaged"
		}
		r.Aside = datasource + "." + what + "-" + now.UTC().Format(snapshotTimeFormat)
		if err := os.Rename(datasource, r.Aside); err != nil {
			return r, fmt.Errorf("keep %s aside: %w", datasource, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return r, err
	}
	if err := renameDurably(tmp, datasource); err != nil {
		return r, fmt.Errorf("put %s in place: %w", datasource, err)
	}
	return r, nil
}

// lockExclusive fails at once if a process holds path (a missing file is
// not held); it returns the unlock.
func lockExclusive(path string) (func(), error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return func() {}, os.MkdirAll(filepath.Dir(path), 0o750)
	}
	if err != nil {
		return nil, err
	}
	if err := flock(f, true); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s is in use (is the IPAM still running? stop it first): %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}
