package health

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/causeway-net/causeway/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitFor = 20 * time.Second

var quiet = slog.New(slog.DiscardHandler)

// serveUnix serves c on a unix socket in a temp dir and returns a client.
func serveUnix(t *testing.T, c *Checker) (healthpb.HealthClient, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run", "health.sock")
	lis, err := ListenUnix("unix://" + path)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx, lis) }()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		require.NoError(t, <-done)
		_, err := os.Stat(path)
		assert.ErrorIs(t, err, os.ErrNotExist, "socket left behind")
	})
	return healthpb.NewHealthClient(conn), path
}

func check(t *testing.T, hc healthpb.HealthClient, service string) string {
	t.Helper()
	r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
	require.NoError(t, err, service)
	return r.GetStatus().String()
}

func TestProbesAggregateSubservices(t *testing.T) {
	c := New(WithLogger(quiet))
	hc, _ := serveUnix(t, c)
	c.Register(Readiness, IPAMCli, NSPCli, NSMEndpoint, Egress)
	c.Register(Liveness, NSMEndpoint)

	assert.Equal(t, "SERVING", check(t, hc, ""))
	assert.Equal(t, "SERVING", check(t, hc, Startup), "a probe without subservices serves")
	assert.Equal(t, "NOT_SERVING", check(t, hc, Readiness))
	assert.Equal(t, "NOT_SERVING", check(t, hc, Liveness))
	assert.Equal(t, "NOT_SERVING", check(t, hc, IPAMCli))

	c.SetServing(IPAMCli, true)
	c.SetServing(NSPCli, true)
	c.SetServing(NSMEndpoint, true)
	assert.Equal(t, "SERVING", check(t, hc, IPAMCli))
	assert.Equal(t, "SERVING", check(t, hc, Liveness))
	assert.Equal(t, "NOT_SERVING", check(t, hc, Readiness), "Egress is still down")

	c.SetServing(Egress, true)
	assert.Equal(t, "SERVING", check(t, hc, Readiness))

	c.SetServing(NSMEndpoint, false)
	assert.Equal(t, "NOT_SERVING", check(t, hc, Readiness))
	assert.Equal(t, "NOT_SERVING", check(t, hc, Liveness))
	assert.Equal(t, "SERVING", check(t, hc, Startup))

	// A probe cannot be set; a subservice cannot become a probe.
	c.SetServing(Readiness, true)
	assert.Equal(t, "NOT_SERVING", check(t, hc, Readiness))
	c.Register(NSPCli, Egress)
	c.SetServing(NSMEndpoint, true)
	assert.Equal(t, "SERVING", check(t, hc, Readiness))

	// Registering a new subservice takes the probe down until it serves;
	// one set before registration keeps its state.
	c.SetServing("Extra", true)
	c.Register(Startup, "Extra", "Other")
	assert.Equal(t, "NOT_SERVING", check(t, hc, Startup))
	c.SetServing("Other", true)
	assert.Equal(t, "SERVING", check(t, hc, Startup))

	_, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "Nope"})
	assert.Equal(t, codes.NotFound, status.Code(err))
}

// watchProbe watches probe until t ends; the returned function is the
// next state.
func watchProbe(t *testing.T, hc healthpb.HealthClient, probe string) func() string {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: probe})
	require.NoError(t, err)
	return func() string {
		r, err := w.Recv()
		require.NoError(t, err)
		return r.GetStatus().String()
	}
}

func TestWatchFollowsProbe(t *testing.T) {
	c := New(WithLogger(quiet))
	hc, _ := serveUnix(t, c)
	c.Register(Liveness, NSMEndpoint)
	next := watchProbe(t, hc, Liveness)
	assert.Equal(t, "NOT_SERVING", next())
	c.SetServing(NSMEndpoint, true)
	assert.Equal(t, "SERVING", next())
	c.SetServing(NSMEndpoint, false)
	assert.Equal(t, "NOT_SERVING", next())
}

func TestListenUnixReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "health.sock")
	require.NoError(t, os.WriteFile(path, []byte("stale"), 0o600))
	c := New(WithLogger(quiet))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.ServeUnix(ctx, path) }()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	require.Eventually(t, func() bool {
		r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: Readiness})
		return err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING
	}, waitFor, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}

func TestReportConnState(t *testing.T) {
	peer := testutil.ServeGRPC(t, "", nil)

	c := New(WithLogger(quiet))
	c.Register(Readiness, NSPCli)
	hc, _ := serveUnix(t, c)
	conn := peer.Dial(t)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.ReportConnState(ctx, conn, NSPCli) }()
	defer func() { cancel(); <-done }()

	// The connection is idle (nothing called it); ReportConnState makes it
	// connect, and the subservice and its probe serve.
	require.Eventually(t, func() bool { return check(t, hc, Readiness) == "SERVING" }, waitFor, 20*time.Millisecond)
	assert.Equal(t, "SERVING", check(t, hc, NSPCli))

	peer.Stop()
	require.Eventually(t, func() bool { return check(t, hc, NSPCli) == "NOT_SERVING" }, waitFor, 20*time.Millisecond)
	assert.Equal(t, "NOT_SERVING", check(t, hc, Readiness))
}

// closingListener accepts connections on 127.0.0.1 and closes them at once,
// counting them: a peer that fails every gRPC connection try.
type closingListener struct {
	lis     net.Listener
	accepts atomic.Int32
	done    chan struct{}
}

func listenClosing(t *testing.T) *closingListener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := &closingListener{lis: lis, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			l.accepts.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(l.stop)
	return l
}

func (l *closingListener) stop() {
	_ = l.lis.Close()
	<-l.done
}

// TestMonitorConnLogsOutagesOnce: a connection that cannot be made is one
// warning naming the subservice, the target and the reason, however many
// times gRPC retries; the subservice is not serving meanwhile. Once the
// peer answers, one line says the connection is ready again.
func TestReportConnStateLogsOutagesOnce(t *testing.T) {
	peer := listenClosing(t)
	addr := peer.lis.Addr().String()
	c, log := loggedChecker()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 50 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	defer reportConnState(c, conn)()

	line, _ := log.Wait(waitFor, nil, 0, LogConnFailing, "subservice", IPAMCli, "target", addr)
	require.NotNil(t, line, log.String())
	assert.Equal(t, "WARN", line["level"])
	assert.Equal(t, "TRANSIENT_FAILURE", line["state"])
	assert.NotEmpty(t, line["error"])
	assert.NotEqual(t, "unknown", line["error"])
	require.Eventually(t, func() bool { return peer.accepts.Load() >= 5 }, waitFor, 10*time.Millisecond, "gRPC retries")
	assert.Equal(t, 1, log.Count(LogConnFailing), "one line for the outage, not one per retry: %s", log.String())
	c.mu.Lock()
	assert.False(t, c.serving[IPAMCli], "not serving while failing")
	c.mu.Unlock()

	peer.stop()
	testutil.ServeGRPC(t, addr, nil)
	line, _ = log.Wait(waitFor, nil, 0, LogConnReady, "subservice", IPAMCli, "target", addr)
	require.NotNil(t, line, log.String())
	assert.Equal(t, 1, log.Count(LogConnFailing), log.String())
}

// TestMonitorConnLogsResolverError: a name that does not resolve is the
// same single warning, with the resolver's reason.
func TestReportConnStateLogsResolverError(t *testing.T) {
	built := make(chan struct{}, 1)
	r := manual.NewBuilderWithScheme("test")
	r.BuildCallback = func(resolver.Target, resolver.ClientConn, resolver.BuildOptions) { built <- struct{}{} }
	c, log := loggedChecker()
	conn, err := grpc.NewClient("test:///ipam-servce:7777", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(r))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	defer reportConnState(c, conn)()

	conn.Connect()
	select {
	case <-built:
	case <-time.After(waitFor):
		t.Fatal("the resolver was not built")
	}
	r.CC().ReportError(errors.New("lookup ipam-servce: no such host"))
	line, _ := log.Wait(waitFor, nil, 0, LogConnFailing, "subservice", IPAMCli, "target", "test:///ipam-servce:7777")
	require.NotNil(t, line, log.String())
	assert.Contains(t, line["error"], "no such host")
	r.CC().ReportError(errors.New("lookup ipam-servce: no such host"))
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, 1, log.Count(LogConnFailing), log.String())
}

// loggedChecker is a checker with IPAMCli in Readiness whose log is kept.
func loggedChecker() (*Checker, *testutil.JSONLog) {
	log := &testutil.JSONLog{}
	c := New(WithLogger(slog.New(slog.NewJSONHandler(log, nil))))
	c.Register(Readiness, IPAMCli)
	return c, log
}

// reportConnState runs c.ReportConnState on conn for IPAMCli; the returned
// function stops it and waits for it.
func reportConnState(c *Checker, conn *grpc.ClientConn) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.ReportConnState(ctx, conn, IPAMCli) }()
	return func() { cancel(); <-done }
}
