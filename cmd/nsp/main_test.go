package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/testutil"
)

const waitFor = 30 * time.Second

// bin is the nsp binary that TestMain builds.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nsp-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	if bin, err = testutil.BuildBinary(dir, "./cmd/nsp", "-ldflags", "-X main.version=test-1.2.3"); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// proc is a running nsp with its JSON log lines.
type proc struct {
	cmd  *exec.Cmd
	log  testutil.JSONLog
	next int // index of the first log line waitLog has not passed yet
	done chan struct{}
	err  error // Wait's result, set before done is closed
}

func start(t *testing.T, bin string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(append(os.Environ(), "SPIFFE_ENDPOINT_SOCKET=", "NSP_INSECURE=true"), env...)
	p := &proc{cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &p.log
	require.NoError(t, cmd.Start())
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("nsp log:\n%s", p.log.String())
		}
	})
	return p
}

// waitLog returns the first log line with the given message after the one
// it returned last.
func (p *proc) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	line, i := p.log.Wait(waitFor, p.done, p.next, msg)
	if i < 0 {
		select {
		case <-p.done:
			t.Fatalf("nsp exited before logging %q", msg)
		default:
			t.Fatalf("nsp did not log %q", msg)
		}
	}
	p.next = i + 1
	return line
}

func (p *proc) wait(t *testing.T) int {
	t.Helper()
	<-p.done
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	require.NoError(t, p.err)
	return 0
}

func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

const cfg1 = `
trenches: [{name: trench-a}, {name: trench-b}]
conduits: [{name: load-balancer, trench: trench-a}]
vips:
  - {name: vip1, address: 20.0.0.1/32, trench: trench-a}
  - {name: vip2, address: 2001:db8::1/128, trench: trench-a}
  - {name: vip3, address: 30.0.0.1/32, trench: trench-b}
`

func addrs(r *nspv1.VipResponse) []string {
	out := []string{}
	for _, v := range r.GetVips() {
		out = append(out, v.GetAddress())
	}
	return out
}

func TestServeWatchEditAndStop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nsp.yaml")
	replaceFile(t, path, cfg1)
	p := start(t, bin, "NSP_PORT=0", "NSP_CONFIG_FILE="+path, "NSP_LOG_LEVEL=debug",
		"NSP_METRICS_PORT=0", "NSP_CONFIG_POLL_INTERVAL=1h")
	addr := p.waitLog(t, "serving")["address"].(string)

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()

	hr, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "nsp.v1.ConfigurationManager"})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, hr.GetStatus())

	client := nspv1.NewConfigurationManagerClient(conn)
	w, err := client.WatchVip(ctx, &nspv1.Vip{Trench: &nspv1.Trench{Name: "trench-a"}})
	require.NoError(t, err)
	r, err := w.Recv()
	require.NoError(t, err)
	assert.Equal(t, []string{"20.0.0.1/32", "2001:db8::1/128"}, addrs(r))

	cw, err := client.WatchConduit(ctx, &nspv1.Conduit{})
	require.NoError(t, err)
	cr, err := cw.Recv()
	require.NoError(t, err)
	require.Len(t, cr.GetConduits(), 1)
	assert.Equal(t, "trench-a", cr.GetConduits()[0].GetTrench().GetName())

	// A broken edit is rejected; the watch sees the next valid edit only.
	replaceFile(t, path, strings.Replace(cfg1, "20.0.0.1/32", "20.0.0.1/99", 1))
	assert.Contains(t, p.waitLog(t, "configuration rejected; keeping the last good configuration")["error"], "20.0.0.1/99")
	replaceFile(t, path, strings.Replace(cfg1, "20.0.0.1/32", "20.0.0.2/32", 1))
	r, err = w.Recv()
	require.NoError(t, err)
	assert.Equal(t, []string{"20.0.0.2/32", "2001:db8::1/128"}, addrs(r))

	// SIGTERM with watches open: they end with Unavailable and nsp exits 0.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	_, err = w.Recv()
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	assert.Equal(t, 0, p.wait(t))
}

func TestMetrics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nsp.yaml")
	replaceFile(t, path, cfg1)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	p := start(t, bin, "NSP_PORT=0", "NSP_CONFIG_FILE="+path, fmt.Sprintf("NSP_METRICS_PORT=%d", port))
	p.waitLog(t, "serving metrics")

	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), `causeway_nsp_watch_streams{kind="vip"} 0`)
	assert.Contains(t, string(body), "go_goroutines")

	// The port is now taken: a second nsp fails at start.
	p2 := start(t, bin, "NSP_PORT=0", "NSP_CONFIG_FILE="+path, fmt.Sprintf("NSP_METRICS_PORT=%d", port))
	assert.Contains(t, p2.waitLog(t, "nsp failed")["error"], "metrics listen")
	assert.Equal(t, 1, p2.wait(t))

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, p.wait(t))
}

func TestFailsFastOnInvalidFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nsp.yaml")
	replaceFile(t, path, "trenches: [{name: a}]\nvips: [{name: v, address: 1.2.3.4, trench: a}]\n")
	p := start(t, bin, "NSP_PORT=0", "NSP_CONFIG_FILE="+path)
	m := p.waitLog(t, "nsp failed")
	assert.Contains(t, m["error"], `vips[0] "v" (line 2): address "1.2.3.4" is not a prefix`)
	assert.Equal(t, 1, p.wait(t))

	p = start(t, bin, "NSP_PORT=0", "NSP_CONFIG_FILE="+filepath.Join(t.TempDir(), "missing.yaml"))
	assert.Contains(t, p.waitLog(t, "nsp failed")["error"], "no such file")
	assert.Equal(t, 1, p.wait(t))
}

func TestVersionAndBadEnv(t *testing.T) {
	out, err := exec.Command(bin, "-version").Output()
	require.NoError(t, err)
	assert.Equal(t, "test-1.2.3\n", string(out))

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "NSP_LOG_LEVEL=loud")
	out, err = cmd.CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, 2, cmd.ProcessState.ExitCode())
	assert.Contains(t, string(out), "NSP_LOG_LEVEL")
}
