package bolt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// Check checks the database file at path as Open does, without changing
// it: its size and headers, every page, bbolt's own consistency check and
// every record. It returns a *DamagedError if the file is damaged (a
// missing file is an error, not damage).
func Check(path string) error {
	if _, err := os.Stat(path); err != nil {
		return err
	}
	db, err := openChecked(path, time.Second, true)
	if err != nil {
		return err
	}
	return db.Close()
}

// openChecked opens an existing database after checking it (checkFile),
// then verifies it through bbolt (verifyDB). Every bbolt call runs with
// panics and memory faults turned into a *DamagedError, in case the check
// missed something.
func openChecked(path string, lockTimeout time.Duration, readOnly bool) (*bbolt.DB, error) {
	unlock, err := lockShared(path, lockTimeout)
	if err != nil {
		return nil, err
	}
	err = checkFile(path)
	unlock()
	if err != nil {
		return nil, err
	}
	var db *bbolt.DB
	err = guard(path, func() error {
		var err error
		db, err = bbolt.Open(path, 0o600, options(lockTimeout, readOnly))
		switch {
		case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
			return damaged(path, "%v", err)
		case errors.Is(err, berrors.ErrTimeout):
			return fmt.Errorf("open %s: another process holds it (%w)", path, err)
		case err != nil:
			return fmt.Errorf("open %s: %w", path, err)
		}
		return verifyDB(path, db)
	})
	if err != nil && db != nil {
		_ = guard(path, db.Close)
		return nil, err
	}
	return db, err
}

// guard runs f with panics and memory faults (a page of a mapped file that
// is not there) turned into a *DamagedError.
func guard(path string, f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = damaged(path, "reading it failed: %v", r)
		}
	}()
	return f()
}

// verifyDB runs bbolt's consistency check and decodes every record.
func verifyDB(path string, db *bbolt.DB) error {
	return db.View(func(tx *bbolt.Tx) error {
		var problems []error
		for err := range tx.Check() {
			problems = append(problems, err)
		}
		if len(problems) > 0 {
			return damaged(path, "bbolt check: %v", errors.Join(problems[:min(len(problems), 3)]...))
		}
		if b := tx.Bucket(mainBucket); b != nil {
			if err := b.ForEach(func(k, v []byte) error { return decodeRecord(k, v) }); err != nil {
				return damaged(path, "%v", err)
			}
		}
		if b := tx.Bucket(journalBucket); b != nil {
			if err := b.ForEach(func(k, e []byte) error {
				kind, key, val, err := decodeEntry(e)
				if err != nil {
					return fmt.Errorf("journal entry %x: %w", k, err)
				}
				if kind == store.OpDelete {
					_, err = store.DecodeKey(key)
					return err
				}
				return decodeRecord(key, val)
			}); err != nil {
				return damaged(path, "%v", err)
			}
		}
		return nil
	})
}

func decodeRecord(k, v []byte) error {
	key, err := store.DecodeKey(k)
	if err != nil {
		return err
	}
	if _, err := store.DecodeValue(key, v); err != nil {
		return fmt.Errorf("record %q: %w", k, err)
	}
	return nil
}

// lockShared takes a shared lock on path (as bbolt does for a read-only
// open, so that no writer changes the file while it is checked), waiting up
// to timeout. It returns the unlock.
func lockShared(path string, timeout time.Duration) (func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := flock(f, false)
		if err == nil {
			return func() { _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: another process holds it (%w)", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// flock locks f without waiting; the lock goes with f's last close.
func flock(f *os.File, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	return syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
}

// createIfMissing creates an empty database at path if there is no file:
// under a temporary name, renamed into place once complete.
func createIfMissing(path string) error {
	if _, err := os.Lstat(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	tmp := path + ".new"
	_ = os.Remove(tmp)
	db, err := bbolt.Open(tmp, 0o600, options(time.Second, false))
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{mainBucket, journalBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	return renameDurably(tmp, path)
}

// renameDurably renames from to to and syncs their directory.
func renameDurably(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	return syncDir(filepath.Dir(to))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
