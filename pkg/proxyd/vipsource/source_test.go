package vipsource

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/internal/yamlfile"
	"github.com/causeway-net/causeway/pkg/nspd/configfile"
	"github.com/causeway-net/causeway/pkg/nspd/nspserver"
	"github.com/causeway-net/causeway/pkg/nspwatch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitFor = 20 * time.Second

var quiet = slog.New(slog.DiscardHandler)

// updates collects what a VIPSource delivers.
type updates chan []string

func (u updates) fn(ps []netip.Prefix) {
	s := []string{}
	for _, p := range ps {
		s = append(s, p.String())
	}
	u <- s
}

func (u updates) next(t *testing.T) []string {
	t.Helper()
	select {
	case s := <-u:
		return s
	case <-time.After(waitFor):
		t.Fatal("no VIP update")
		return nil
	}
}

// run starts src and stops it at the end of the test.
func run(t *testing.T, src VIPSource) updates {
	t.Helper()
	u := make(updates, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, u.fn) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return u
}

// startServer serves impl on addr ("" picks a port) until the test ends.
func startServer(t *testing.T, addr string, impl nspv1.ConfigurationManagerServer) *testutil.GRPCServer {
	t.Helper()
	return testutil.ServeGRPC(t, addr, func(s *grpc.Server) { nspv1.RegisterConfigurationManagerServer(s, impl) })
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, MaxDelay: 500 * time.Millisecond},
			MinConnectTimeout: 2 * time.Second,
		}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func nspWith(t *testing.T, doc string) *nspserver.Server {
	t.Helper()
	cfg, err := configfile.Parse([]byte(doc))
	require.NoError(t, err)
	srv := nspserver.New(quiet)
	srv.SetConfig(cfg)
	t.Cleanup(srv.Close)
	return srv
}

const twoTrenches = `
trenches: [{name: red}, {name: blue}]
conduits: [{name: lb, trench: red}, {name: lb, trench: blue}]
vips:
  - {name: b, address: 2001:db8::1/128, trench: red}
  - {name: a, address: 20.0.0.1/32, trench: red}
  - {name: c, address: 30.0.0.1/32, trench: blue}
`

func TestNSPSourceDeliversAndFollowsChanges(t *testing.T) {
	srv := nspWith(t, twoTrenches)
	s := startServer(t, "", srv)
	u := run(t, NewNSPSource(dial(t, s.Addr), "red", nspwatch.WithLogger(quiet)))
	assert.Equal(t, []string{"20.0.0.1/32", "2001:db8::1/128"}, u.next(t))

	cfg, err := configfile.Parse([]byte(strings.Replace(twoTrenches, "20.0.0.1/32", "20.0.0.2/32", 1)))
	require.NoError(t, err)
	srv.SetConfig(cfg)
	assert.Equal(t, []string{"20.0.0.2/32", "2001:db8::1/128"}, u.next(t))
}

func TestNSPSourceReconnectsAfterServerRestart(t *testing.T) {
	s1 := startServer(t, "", nspWith(t, twoTrenches))
	u := run(t, NewNSPSource(dial(t, s1.Addr), "red", nspwatch.WithLogger(quiet), nspwatch.WithBackoff(20*time.Millisecond, 200*time.Millisecond)))
	assert.Equal(t, []string{"20.0.0.1/32", "2001:db8::1/128"}, u.next(t))

	// Same port, same configuration: the source re-opens the watch but
	// delivers nothing new.
	s1.Stop()
	s2 := startServer(t, s1.Addr, nspWith(t, twoTrenches))
	s2.Stop()
	// Same port, new configuration: delivered. It being the next update also
	// proves that the restart with the same list delivered nothing.
	startServer(t, s1.Addr, nspWith(t, strings.Replace(twoTrenches, "20.0.0.1/32", "20.0.0.7/32", 1)))
	assert.Equal(t, []string{"20.0.0.7/32", "2001:db8::1/128"}, u.next(t))
}

func TestNSPSourceSkipsInvalidAndRetriesFailedStreams(t *testing.T) {
	f, s := testutil.ServeFakeNSP(t, "", 0)
	u := run(t, NewNSPSource(dial(t, s.Addr), "red", nspwatch.WithLogger(quiet), nspwatch.WithBackoff(10*time.Millisecond, 50*time.Millisecond)))
	filter := <-f.VIPWatches
	assert.Equal(t, "red", filter.GetTrench().GetName())
	assert.Empty(t, filter.GetName())
	assert.Empty(t, filter.GetAddress())

	vip := func(addr string) *nspv1.Vip { return &nspv1.Vip{Name: "v-" + addr, Address: addr} }
	f.VIPs <- &nspv1.VipResponse{Vips: []*nspv1.Vip{
		vip("20.0.0.2"), vip("bogus"), vip("20.0.0.1/32"), vip("20.0.0.1"), vip("20.0.0.1/33"), vip("40.0.0.9/24"),
	}}
	assert.Equal(t, []string{"20.0.0.1/32", "20.0.0.2/32", "40.0.0.0/24"}, u.next(t))

	// An empty list is a real update (every VIP removed).
	f.VIPs <- &nspv1.VipResponse{}
	assert.Equal(t, []string{}, u.next(t))

	// The server fails the stream: the source opens a new watch and the
	// list is delivered again only if it changed.
	f.VIPs <- nil
	<-f.VIPWatches
	f.VIPs <- &nspv1.VipResponse{}
	f.VIPs <- nil
	<-f.VIPWatches
	f.VIPs <- &nspv1.VipResponse{Vips: []*nspv1.Vip{vip("2001:db8::5")}}
	assert.Equal(t, []string{"2001:db8::5/128"}, u.next(t))
}

// replaceFile replaces the file at path whole with doc (a rename), as
// configuration tools do: written in place, a read between the truncation
// and the write is refused as an empty file (seen under load, before the
// refusal a test waited for).
func replaceFile(t *testing.T, path, doc string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(doc), 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

func TestFileSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vips.yaml")
	write := func(doc string) { replaceFile(t, path, doc) }
	write(twoTrenches)
	u := run(t, NewFileSource(path, "red", quiet, yamlfile.WithDebounce(20*time.Millisecond)))
	assert.Equal(t, []string{"20.0.0.1/32", "2001:db8::1/128"}, u.next(t))

	// A change in another trench, a reordering and a broken edit deliver
	// nothing; the next real change of the trench is the next update.
	write(strings.Replace(twoTrenches, "30.0.0.1/32", "30.0.0.2/32", 1))
	write(strings.Replace(twoTrenches, "2001:db8::1/128", "2001:db8::1/129", 1))
	write(twoTrenches + "  - {name: d, address: 20.0.0.0/31, trench: red}\n")
	assert.Equal(t, []string{"20.0.0.0/31", "20.0.0.1/32", "2001:db8::1/128"}, u.next(t))
}

// quiet checks that nothing was delivered so far.
func (u updates) quiet(t *testing.T) {
	t.Helper()
	select {
	case s := <-u:
		t.Fatalf("unexpected VIP update %v", s)
	default:
	}
}

// logged waits for a line with msg in log and returns it.
func logged(t *testing.T, log *testutil.JSONLog, from int, msg string) (map[string]any, int) {
	t.Helper()
	line, i := log.Wait(waitFor, nil, from, msg)
	require.GreaterOrEqual(t, i, 0, "no %q line in: %s", msg, log.String())
	return line, i
}

// TestFileSourceWaitsForMissingFile: a file missing at start is said once
// and waited for, with no VIPs delivered; once it appears its VIPs are.
// Deleting it keeps the last good VIPs (nothing is delivered) and says so;
// recreating it delivers its VIPs; a damaged version is refused and the
// last good VIPs stay.
func TestFileSourceWaitsForMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vips.yaml")
	write := func(doc string) { replaceFile(t, path, doc) }
	var log testutil.JSONLog
	u := run(t, NewFileSource(path, "red", slog.New(slog.NewJSONHandler(&log, nil)),
		yamlfile.WithDebounce(20*time.Millisecond), yamlfile.WithPollInterval(50*time.Millisecond)))

	line, i := logged(t, &log, 0, missingAtStart)
	assert.Equal(t, "WARN", line["level"])
	assert.Equal(t, path, line["path"])
	time.Sleep(300 * time.Millisecond) // several periodic re-reads of the missing file
	u.quiet(t)
	assert.Equal(t, 1, log.Count(missingAtStart), "said once: %s", log.String())

	write(twoTrenches)
	assert.Equal(t, []string{"20.0.0.1/32", "2001:db8::1/128"}, u.next(t))

	require.NoError(t, os.Remove(path))
	line, i = logged(t, &log, i, removedKeepingVIPs)
	assert.Equal(t, "WARN", line["level"])
	assert.Equal(t, path, line["path"])
	u.quiet(t)

	write(strings.Replace(twoTrenches, "20.0.0.1/32", "20.0.0.2/32", 1))
	assert.Equal(t, []string{"20.0.0.2/32", "2001:db8::1/128"}, u.next(t))

	write(strings.Replace(twoTrenches, "20.0.0.1/32", "20.0.0.1/99", 1))
	line, _ = logged(t, &log, i, refusedKeepingVIPs)
	assert.Equal(t, "ERROR", line["level"])
	assert.Contains(t, line["error"], "20.0.0.1/99")
	u.quiet(t)
	write(twoTrenches)
	assert.Equal(t, []string{"20.0.0.1/32", "2001:db8::1/128"}, u.next(t))
}

// A file damaged at start is refused with its reason and waited for.
func TestFileSourceWaitsForValidFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vips.yaml")
	require.NoError(t, os.WriteFile(path, []byte("vips: [{name: a}]"), 0o644))
	var log testutil.JSONLog
	u := run(t, NewFileSource(path, "red", slog.New(slog.NewJSONHandler(&log, nil)), yamlfile.WithDebounce(20*time.Millisecond)))
	line, _ := logged(t, &log, 0, refusedAtStart)
	assert.Equal(t, "ERROR", line["level"])
	assert.Contains(t, line["error"], "trench is empty")
	u.quiet(t)
	replaceFile(t, path, twoTrenches)
	assert.Equal(t, []string{"20.0.0.1/32", "2001:db8::1/128"}, u.next(t))
}

// The source fails only when the file's directory cannot be watched.
func TestFileSourceFailsWithoutDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope", "vips.yaml")
	err := NewFileSource(path, "red", quiet).Run(context.Background(), func([]netip.Prefix) {})
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "static VIP source")
}

// A watch whose server is down fails fast and says so once: one warning
// for the outage, debug lines for the retries, and one line when the watch
// is back.
func TestWatchOutageLoggedOnce(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	require.NoError(t, lis.Close()) // down for now
	var buf testutil.SyncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	u := run(t, NewNSPSource(dial(t, addr), "red", nspwatch.WithLogger(log), nspwatch.WithBackoff(10*time.Millisecond, 20*time.Millisecond)))
	require.Eventually(t, func() bool { return strings.Count(buf.String(), "watch still failing") >= 3 }, waitFor, 10*time.Millisecond,
		"retries while the server is down: %s", buf.String())
	require.Equal(t, 1, strings.Count(buf.String(), "level=WARN"), "one warning for the outage: %s", buf.String())

	startServer(t, addr, nspWith(t, twoTrenches))
	assert.Equal(t, []string{"20.0.0.1/32", "2001:db8::1/128"}, u.next(t))
	require.Eventually(t, func() bool { return strings.Contains(buf.String(), "watch re-established") }, waitFor, 10*time.Millisecond)
	require.Equal(t, 1, strings.Count(buf.String(), "level=WARN"))
}
