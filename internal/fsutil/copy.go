// Package fsutil holds the project's one file copy: the IPAM's snapshots,
// its store conversions and the Meridio reader's scratch copies use it.
package fsutil

import (
	"fmt"
	"io"
	"os"
)

// CopyFile copies from to a new file to (mode 0600, replaced if it exists),
// synced to disk before it returns. Errors wrap the cause (os.ErrNotExist
// for a missing source).
func CopyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("copy %s to %s: %w", from, to, err)
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s to %s: %w", from, to, err)
	}
	return nil
}
