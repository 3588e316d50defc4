package meridio

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Header is how every SQLite 3 database file begins.
const Header = "SQLite format 3\x00"

// IsSQLite reports whether the file at path begins with Header. A missing
// file is not an error (false).
func IsSQLite(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, len(Header))
	if _, err := io.ReadFull(f, head); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return false, nil
		}
		return false, err // a *PathError: it names the path
	}
	return string(head) == Header, nil
}
