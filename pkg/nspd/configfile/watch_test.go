package configfile

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

	"github.com/causeway-net/causeway/internal/testutil"

	"github.com/causeway-net/causeway/internal/yamlfile"
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
			yamlfile.WithPollInterval(poll),
			yamlfile.WithLogger(slog.New(slog.DiscardHandler)),
			yamlfile.WithRejectHook(func(err error) { w.rejects <- err }))
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

// configMapDir lays out a directory the way the kubelet's atomic writer
// projects a ConfigMap volume: each version in a fresh "..<timestamp>.<random>"
// directory, "..data" a symlink to it swapped by renaming a new symlink over
// it, and each key a symlink "<key> -> ..data/<key>" made once; a key gone
// from the ConfigMap loses its symlink, and the previous version's directory
// is removed last.
type configMapDir struct {
	dir     string
	current string // the version directory ..data points to
	keys    map[string]bool
}

func newConfigMapDir(t *testing.T) *configMapDir {
	return &configMapDir{dir: t.TempDir(), keys: map[string]bool{}}
}

// publish writes one key, nsp.yaml.
func (c *configMapDir) publish(t *testing.T, content string) {
	t.Helper()
	c.publishKeys(t, map[string]string{"nsp.yaml": content})
}

func (c *configMapDir) publishKeys(t *testing.T, payload map[string]string) {
	t.Helper()
	ver, err := os.MkdirTemp(c.dir, "..2026_12_01_12_00_00.")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(ver, 0o755))
	for k, v := range payload {
		require.NoError(t, os.WriteFile(filepath.Join(ver, k), []byte(v), 0o644))
	}
	tmp := filepath.Join(c.dir, "..data_tmp")
	require.NoError(t, os.Symlink(filepath.Base(ver), tmp))
	require.NoError(t, os.Rename(tmp, filepath.Join(c.dir, "..data")))
	for k := range payload {
		if !c.keys[k] {
			require.NoError(t, os.Symlink(filepath.Join("..data", k), filepath.Join(c.dir, k)))
			c.keys[k] = true
		}
	}
	for k := range c.keys {
		if _, ok := payload[k]; !ok {
			require.NoError(t, os.Remove(filepath.Join(c.dir, k)))
			delete(c.keys, k)
		}
	}
	if c.current != "" {
		require.NoError(t, os.RemoveAll(c.current))
	}
	c.current = ver
}

func TestWatchConfigMapSymlinkSwap(t *testing.T) {
	cm := newConfigMapDir(t)
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

// TestWatchConfigMapKubeletLayout follows the file through the kubelet's
// updates with notifications only (no periodic re-read): the file is a
// symlink whose target directory changes, the inode the path resolves to is
// new at each version, and the old one is deleted. Swaps of good versions
// are never seen as a rejection; another key's changes are not deliveries;
// the key removed from the ConfigMap is a rejection (the last good version
// stays) until it comes back.
func TestWatchConfigMapKubeletLayout(t *testing.T) {
	cm := newConfigMapDir(t)
	cm.publishKeys(t, map[string]string{"nsp.yaml": doc("20.0.0.1/32"), "other.yaml": "a: 1\n"})
	path := filepath.Join(cm.dir, "nsp.yaml")
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&os.ModeSymlink, "the key is a symlink into ..data")
	w := startWatch(t, path, nil, noPoll)
	assert.Equal(t, []string{"20.0.0.1/32"}, vips(w.next(t)))

	for i := 2; i <= 6; i++ {
		addr := fmt.Sprintf("20.0.0.%d/32", i)
		cm.publishKeys(t, map[string]string{"nsp.yaml": doc(addr), "other.yaml": fmt.Sprintf("a: %d\n", i)})
		assert.Equal(t, []string{addr}, vips(w.next(t)))
	}
	// Only the other key changes: a swap, the same content, no delivery.
	cm.publishKeys(t, map[string]string{"nsp.yaml": doc("20.0.0.6/32"), "other.yaml": "a: 7\n"})
	cm.publishKeys(t, map[string]string{"nsp.yaml": doc("20.0.0.8/32")})
	assert.Equal(t, []string{"20.0.0.8/32"}, vips(w.next(t)))
	w.quiet(t)
	select {
	case err := <-w.rejects:
		t.Fatalf("a swap of good versions was rejected: %v", err)
	default:
	}

	cm.publishKeys(t, map[string]string{"other.yaml": "a: 9\n"})
	assert.ErrorIs(t, w.rejected(t), os.ErrNotExist)
	cm.publishKeys(t, map[string]string{"nsp.yaml": doc("20.0.0.10/32")})
	assert.Equal(t, []string{"20.0.0.10/32"}, vips(w.next(t)))
	entries, err := os.ReadDir(cm.dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Len(t, names, 3, "..data, one version directory and the key: %v", names)
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

// TestWatchUndoneBrokenEditIsSaid: a broken edit is rejected; putting the
// file back as it was delivers nothing (nothing changed) but is logged and
// given to the recover hook, so that the rejection is not the last word.
func TestWatchUndoneBrokenEditIsSaid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nsp.yaml")
	write(t, path, doc("20.0.0.1/32"))
	var log testutil.JSONLog
	configs, rejects, recovers := make(chan *Config, 16), make(chan error, 16), make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, path, nil, func(c *Config) { configs <- c },
			yamlfile.WithPollInterval(noPoll),
			yamlfile.WithLogger(slog.New(slog.NewJSONHandler(&log, nil))),
			yamlfile.WithRejectHook(func(err error) { rejects <- err }),
			yamlfile.WithRecoverHook(func() { recovers <- struct{}{} }))
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	w := &watched{configs: configs, rejects: rejects}
	assert.Equal(t, []string{"20.0.0.1/32"}, vips(w.next(t)))

	for _, broken := range []func(){
		func() { write(t, path, doc("20.0.0.1/32", "20.0.0.300/32")) },
		func() { require.NoError(t, os.Remove(path)) },
	} {
		broken()
		require.Error(t, w.rejected(t))
		select {
		case <-recovers:
			t.Fatal("recovered before the file was fixed")
		default:
		}
		write(t, path, doc("20.0.0.1/32"))
		select {
		case <-recovers:
		case <-time.After(waitFor):
			t.Fatal("the undone edit was not reported")
		}
		w.quiet(t)
	}
	assert.Equal(t, 2, log.Count("configuration valid again, the same as the one in force"), log.String())

	// A good edit after that is delivered as before, and is no recovery.
	write(t, path, doc("20.0.0.2/32"))
	assert.Equal(t, []string{"20.0.0.2/32"}, vips(w.next(t)))
	select {
	case <-recovers:
		t.Fatal("a delivered change is no recovery")
	default:
	}
}

// TestWatchRejectLogReplacesTheLine: a caller's reject log says each new
// problem in its own words, once, and the watch's own line is not written.
func TestWatchRejectLogReplacesTheLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nsp.yaml")
	var log testutil.JSONLog
	said := make(chan error, 16)
	configs := make(chan *Config, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, path, nil, func(c *Config) { configs <- c },
			yamlfile.WithPollInterval(20*time.Millisecond),
			yamlfile.WithLogger(slog.New(slog.NewJSONHandler(&log, nil))),
			yamlfile.WithRejectLog(func(err error) { said <- err }))
	}()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	w := &watched{configs: configs, rejects: said}
	assert.ErrorIs(t, w.rejected(t), os.ErrNotExist)
	time.Sleep(200 * time.Millisecond) // periodic re-reads of the same problem
	select {
	case err := <-said:
		t.Fatalf("the same problem said twice: %v", err)
	default:
	}
	write(t, path, doc("20.0.0.1/32"))
	assert.Equal(t, []string{"20.0.0.1/32"}, vips(w.next(t)))
	assert.Zero(t, log.Count("configuration rejected; keeping the last good configuration"), log.String())
}
