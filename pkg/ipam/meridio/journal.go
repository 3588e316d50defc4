package meridio

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/causeway-net/causeway/internal/fsutil"
)

// Companions are the files SQLite keeps beside a database while it writes
// (a rollback journal, a write-ahead log). One that is not empty belongs to
// the database: it holds what the last writer (a Meridio IPAM that was
// killed, say) left unfinished.
var Companions = []string{"-journal", "-wal"}

// hasCompanion reports whether path has a non-empty companion file.
func hasCompanion(path string) bool {
	for _, s := range Companions {
		if info, err := os.Stat(path + s); err == nil && info.Size() > 0 {
			return true
		}
	}
	return false
}

// recoveredCopy copies the database at path with its companions to a
// scratch file (beside it, or in the temporary directory if that cannot be
// written), so that SQLite can finish the last writer's work there (roll
// a hot journal back, replay a log) without touching the original. It
// returns the copy and its removal.
func recoveredCopy(path string) (string, func(), error) {
	var errs []error
	for _, dir := range []string{filepath.Dir(path), os.TempDir()} {
		f, err := os.CreateTemp(dir, filepath.Base(path)+".read-*")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		scratch := f.Name()
		_ = f.Close()
		remove := func() {
			for _, s := range append([]string{""}, append(Companions, "-shm")...) {
				_ = os.Remove(scratch + s)
			}
		}
		if err := copyWith(path, scratch); err != nil {
			remove()
			errs = append(errs, err)
			continue
		}
		return scratch, remove, nil
	}
	return "", nil, fmt.Errorf("copy %s to recover what its last writer left: %w", path, errors.Join(errs...))
}

// copyWith copies the database at from and its companions to to.
func copyWith(from, to string) error {
	for _, s := range append([]string{""}, Companions...) {
		if err := fsutil.CopyFile(from+s, to+s); err != nil && !(s != "" && errors.Is(err, os.ErrNotExist)) {
			return err
		}
	}
	return nil
}
