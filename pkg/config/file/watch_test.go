package file

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const waitFor = 20 * time.Second

func doc(addrs ...string) string {
	s := "trenches: [{name: t}]\nvips:\n"
	for i, a := range addrs {
		s += fmt.Sprintf("  - {name: v%d, address: %q, trench: t}\n", i, a)
	}
	return s
}

// watched runs Watch on path and returns the channels of delivered configs
// and rejections; the watch stops when the test ends.
type watched struct {
	configs chan *Config
	rejects chan error
}

func startWatch(t *testing.T, path string, last *Config, poll time.Duration) *watched {
	t.Helper()
	w := &watched{configs: make(chan *Config, 16), rejects: make(chan error, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, path, last, func(c *Config) { w.configs <- c },
			WithPollInterval(poll),
			WithLogger(slog.New(slog.DiscardHandler)),
			WithRejectHook(func(err error) { w.rejects <- err }))
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return w
}

func (w *watched) next(t *testing.T) *Config {
	t.Helper()
	select {
	case c := <-w.configs:
		return c
	case <-time.After(waitFor):
		t.Fatal("no configuration delivered")
		return nil
	}
}

// rejected returns the next rejection. An in-place write truncates the file
// before it writes it; a loaded machine may let the watch read it in between,
// so a transient "empty" rejection is skipped.
func (w *watched) rejected(t *testing.T) error {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case err := <-w.rejects:
			if !strings.Contains(err.Error(), "the file is empty") {
				return err
			}
		case <-deadline:
			t.Fatal("no rejection reported")
			return nil
		}
	}
}

// quiet checks that nothing was delivered so far; a later delivery of an
// expected config proves that the watch has processed earlier events.
func (w *watched) quiet(t *testing.T) {
	t.Helper()
	select {
	case c := <-w.configs:
		t.Fatalf("unexpected delivery: %+v", c)
	default:
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

func vips(c *Config) []string {
	var out []string
	for _, p := range c.VIPPrefixes("") {
		out = append(out, p.String())
	}
	return out
}

const noPoll = time.Hour

func TestWatchEditsInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nsp.yaml")
	write(t, path, doc("20.0.0.1/32"))
	w := startWatch(t, path, nil, noPoll)
	assert.Equal(t, []string{"20.0.0.1/32"}, vips(w.next(t)))

	write(t, path, doc("20.0.0.1/32", "20.0.0.2/32"))
	assert.Equal(t, []string{"20.0.0.1/32", "20.0.0.2/32"}, vips(w.next(t)))

	// A broken edit is rejected with its reason; nothing is delivered.
	write(t, path, doc("20.0.0.1/32", "not-an-address"))
	assert.Contains(t, w.rejected(t).Error(), `"not-an-address" is not a prefix`)
	write(t, path, "trenches: [{name: t}]\nvip: []\n")
	assert.Contains(t, w.rejected(t).Error(), "field vip not found")
	w.quiet(t)

	// Reformatting without a semantic change is not delivered; the next real
	// change is.
	write(t, path, "# same as before\n"+doc("20.0.0.1/32", "20.0.0.2/32"))
	write(t, path, doc("20.0.0.3/32"))
	assert.Equal(t, []string{"20.0.0.3/32"}, vips(w.next(t)))
	w.quiet(t)
}

func TestWatchInitialIsSkippedWhenEqualToLast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nsp.yaml")
	write(t, path, doc("20.0.0.1/32"))
	last, err := Load(path)
	require.NoError(t, err)
	w := startWatch(t, path, last, noPoll)
	write(t, path, doc("20.0.0.9/32"))
	assert.Equal(t, []string{"20.0.0.9/32"}, vips(w.next(t)))
	w.quiet(t)
}

func TestWatchInitiallyBrokenThenFixed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nsp.yaml")
	w := startWatch(t, path, nil, noPoll)
	assert.ErrorIs(t, w.rejected(t), os.ErrNotExist)
	write(t, path, doc("20.0.0.1/33"))
	assert.Contains(t, w.rejected(t).Error(), "not a prefix")
	write(t, path, doc("20.0.0.1/32"))
	assert.Equal(t, []string{"20.0.0.1/32"}, vips(w.next(t)))
}

func TestWatchRenameReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nsp.yaml")
	write(t, path, doc("20.0.0.1/32"))
	w := startWatch(t, path, nil, noPoll)
	assert.Equal(t, []string{"20.0.0.1/32"}, vips(w.next(t)))

	// An editor writes a new file and renames it over the old one; the
	// old inode (the one an inotify watch on the file would follow) is gone.
	for i, addr := range []string{"20.0.0.2/32", "20.0.0.3/32"} {
		tmp := filepath.Join(dir, fmt.Sprintf(".nsp.yaml.swp%d", i))
		write(t, tmp, doc(addr))
		require.NoError(t, os.Rename(tmp, path))
		assert.Equal(t, []string{addr}, vips(w.next(t)))
	}

	// Delete then recreate: the deletion is rejected, the recreation applies.
	require.NoError(t, os.Remove(path))
	assert.ErrorIs(t, w.rejected(t), os.ErrNotExist)
	write(t, path, doc("20.0.0.4/32"))
	assert.Equal(t, []string{"20.0.0.4/32"}, vips(w.next(t)))
}

// configMapDir lays out a directory the way the kubelet projects a ConfigMap:
// nsp.yaml -> ..data/nsp.yaml, ..data -> ..<version>.
type configMapDir struct {
	dir     string
	version int
}

func (c *configMapDir) publish(t *testing.T, content string) {
	t.Helper()
	c.version++
	ver := fmt.Sprintf("..2026_11_30_%d", c.version)
	require.NoError(t, os.Mkdir(filepath.Join(c.dir, ver), 0o755))
	write(t, filepath.Join(c.dir, ver, "nsp.yaml"), content)
	tmp := filepath.Join(c.dir, "..data_tmp")
	require.NoError(t, os.Symlink(ver, tmp))
	require.NoError(t, os.Rename(tmp, filepath.Join(c.dir, "..data")))
	if c.version > 1 {
		require.NoError(t, os.RemoveAll(filepath.Join(c.dir, fmt.Sprintf("..2026_11_30_%d", c.version-1))))
	} else {
		require.NoError(t, os.Symlink("..data/nsp.yaml", filepath.Join(c.dir, "nsp.yaml")))
	}
}

func TestWatchConfigMapSymlinkSwap(t *testing.T) {
	cm := &configMapDir{dir: t.TempDir()}
	cm.publish(t, doc("20.0.0.1/32"))
	path := filepath.Join(cm.dir, "nsp.yaml")
	w := startWatch(t, path, nil, noPoll)
	assert.Equal(t, []string{"20.0.0.1/32"}, vips(w.next(t)))

	cm.publish(t, doc("20.0.0.2/32"))
	assert.Equal(t, []string{"20.0.0.2/32"}, vips(w.next(t)))

	cm.publish(t, doc("bad"))
	assert.Contains(t, w.rejected(t).Error(), `"bad" is not a prefix`)

	cm.publish(t, doc("2001:db8::/64"))
	assert.Equal(t, []string{"2001:db8::/64"}, vips(w.next(t)))
}

// A symlink into a directory that is not watched gets no notification; the
// periodic re-read still sees the change.
func TestWatchPollBackstop(t *testing.T) {
	target := filepath.Join(t.TempDir(), "real.yaml")
	write(t, target, doc("20.0.0.1/32"))
	path := filepath.Join(t.TempDir(), "nsp.yaml")
	require.NoError(t, os.Symlink(target, path))
	w := startWatch(t, path, nil, 50*time.Millisecond)
	assert.Equal(t, []string{"20.0.0.1/32"}, vips(w.next(t)))
	write(t, target, doc("20.0.0.2/32"))
	assert.Equal(t, []string{"20.0.0.2/32"}, vips(w.next(t)))
}

func TestWatchMissingDirectory(t *testing.T) {
	err := Watch(context.Background(), filepath.Join(t.TempDir(), "nope", "nsp.yaml"), nil, func(*Config) {})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "watch config directory")
}
