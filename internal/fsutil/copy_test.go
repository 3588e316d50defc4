package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCopyFile(t *testing.T) {
	dir := t.TempDir()
	from, to := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, os.WriteFile(from, []byte("hello"), 0o644))
	require.NoError(t, os.WriteFile(to, []byte("older and longer"), 0o644))
	require.NoError(t, CopyFile(from, to))
	got, err := os.ReadFile(to)
	require.NoError(t, err)
	require.Equal(t, "hello", string(got), "the target is replaced, not appended to")

	err = CopyFile(filepath.Join(dir, "missing"), to)
	require.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
}
