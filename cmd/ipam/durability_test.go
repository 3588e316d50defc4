package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testIPAM is buildIPAM for a test, skipped in -short mode.
func testIPAM(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the ipam binary")
	}
	return buildIPAM(t)
}

// buildIPAM builds this command into a temporary directory.
func buildIPAM(t testing.TB) string {
	t.Helper()
	return testutil.BuildBinaries(t, "./cmd/ipam")["ipam"]
}

// proc is a running ipam binary.
type proc struct {
	cmd    *exec.Cmd
	log    testutil.JSONLog // standard error
	done   chan struct{}    // closed at the exit
	err    error            // Wait's result, set before done is closed
	addr   string
	conn   *grpc.ClientConn
	client ipamv1.IpamClient
}

// launch starts cmd and returns once a log line has the message msg; the
// test fails if the process exits first or timeout passes. The process is
// killed at the end of the test if still running.
func launch(t testing.TB, cmd *exec.Cmd, msg string, timeout time.Duration) (*proc, map[string]any) {
	t.Helper()
	p := &proc{cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &p.log
	require.NoError(t, cmd.Start())
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	line, i := p.log.Wait(timeout, p.done, 0, msg)
	if i < 0 {
		select {
		case <-p.done:
			t.Fatalf("ipam exited before %q: %v", msg, p.err)
		default:
			t.Fatalf("no %q", msg)
		}
	}
	return p, line
}

// startIPAM runs bin with env (on top of a clean IPAM_* set) and waits for its
// "serving" log line.
func startIPAM(t testing.TB, bin string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, testEnv(env...)...)
	p, serving := launch(t, cmd, "serving", 60*time.Second)
	p.addr, _ = serving["address"].(string)
	var err error
	p.conn, err = grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.conn.Close() })
	p.client = ipamv1.NewIpamClient(p.conn)
	return p
}

// logged reports how many log lines had the message msg.
func (p *proc) logged(msg string) int { return p.log.Count(msg) }

func (p *proc) kill(t testing.TB, sig syscall.Signal) error {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	select {
	case <-p.done:
		_ = p.conn.Close()
		return p.err
	case <-time.After(60 * time.Second):
		t.Fatal("ipam did not exit")
		return nil
	}
}

type childID struct {
	family        ipamv1.IPFamily
	conduit, node string
	name          string
}

func (c childID) req() *ipamv1.Child {
	return &ipamv1.Child{Name: c.name, Subnet: &ipamv1.Subnet{
		Conduit:  &nspv1.Conduit{Name: c.conduit, Trench: &nspv1.Trench{Name: "default"}},
		Node:     c.node,
		IpFamily: c.family,
	}}
}

// allocateAll allocates every child with 16 concurrent callers.
func allocateAll(t testing.TB, c ipamv1.IpamClient, ids []childID) map[childID]string {
	t.Helper()
	var mu sync.Mutex
	out := make(map[childID]string, len(ids))
	work := make(chan childID)
	var wg sync.WaitGroup
	var firstErr error
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				p, err := c.Allocate(ctx, id.req())
				cancel()
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("%v: %w", id, err)
				} else if err == nil {
					out[id] = p.GetAddress() + "/" + strconv.Itoa(int(p.GetPrefixLength()))
				}
				mu.Unlock()
			}
		}()
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	require.NoError(t, firstErr)
	return out
}

func children(prefix string, n int) []childID {
	var ids []childID
	for i := 0; i < n; i++ {
		fam := ipamv1.IPFamily_IPV4
		if i%5 == 4 {
			fam = ipamv1.IPFamily_IPV6
		}
		ids = append(ids, childID{fam, fmt.Sprintf("conduit-%d", i%2), fmt.Sprintf("worker-%d", i/2%3), fmt.Sprintf("%s-%d-src", prefix, i)})
	}
	return ids
}

// assertReclaimed re-allocates every child of old (the proxies' renewals):
// each gets its old address; then new children get none of those.
func assertReclaimed(t *testing.T, c ipamv1.IpamClient, old map[childID]string) {
	t.Helper()
	var ids []childID
	for id := range old {
		ids = append(ids, id)
	}
	again := allocateAll(t, c, ids)
	taken := map[string]childID{}
	for id, addr := range old {
		assert.Equal(t, addr, again[id], "%v", id)
		taken[addr] = id
	}
	for id, addr := range allocateAll(t, c, children("new", 500)) {
		prev, dup := taken[addr]
		assert.False(t, dup, "%v got %s, already held by %v", id, addr, prev)
		taken[addr] = id
	}
}

// TestDurabilityAfterKill: 1,000 acknowledged allocations survive kill -9;
// after the restart every child gets its address back and new children never
// collide with old ones.
func TestDurabilityAfterKill(t *testing.T) {
	bin := testIPAM(t)
	db := filepath.Join(t.TempDir(), "data", "registry.db")
	env := "IPAM_DATASOURCE=" + db

	p := startIPAM(t, bin, env)
	old := allocateAll(t, p.client, children("old", 1000))
	require.Len(t, old, 1000)
	err := p.kill(t, syscall.SIGKILL)
	require.Error(t, err, "killed")

	p = startIPAM(t, bin, env)
	assertReclaimed(t, p.client, old)

	// Health is served; SIGTERM stops cleanly.
	resp, err := healthpb.NewHealthClient(p.conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "ipam.v1.Ipam"})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
	assert.NoError(t, p.kill(t, syscall.SIGTERM), "graceful stop exits 0")
}

func TestInvalidConfigurationExitsNonZero(t *testing.T) {
	bin := testIPAM(t)
	for _, env := range []string{
		"IPAM_PREFIX_IPV4=10.0.0.0/33",
		"IPAM_PREFIX_IPV4=fd00::/48",
		"IPAM_NODE_PREFIX_LENGTH_IPV4=20",
		"IPAM_CONDUIT_PREFIX_LENGTH_IPV6=40",
		"IPAM_IP_FAMILY=ipx",
		"IPAM_LOG_LEVEL=loud",
		"IPAM_TRENCH_NAME=a b",
		"IPAM_GARBAGE_COLLECTION_THRESHOLD=1m",
		"IPAM_PORT=port",
	} {
		cmd := exec.Command(bin)
		cmd.Env = []string{"IPAM_DATASOURCE=" + filepath.Join(t.TempDir(), "db"), env}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s: %s", env, out)
		assert.Equal(t, 2, exit.ExitCode(), "%s: %s", env, out)
		assert.Contains(t, string(out), strings.SplitN(env, "=", 2)[0][:len("IPAM_")+4], "%s: the message names the variable", env)
	}
}

// BenchmarkRSS10kAllocations reports the resident memory of an ipam process
// that holds 10,000 allocations (the metric is RSS-MiB; b.N is ignored).
func BenchmarkRSS10kAllocations(b *testing.B) {
	bin := buildIPAM(b)
	p := startIPAM(b, bin, "IPAM_DATASOURCE="+filepath.Join(b.TempDir(), "registry.db"),
		"IPAM_PREFIX_IPV4=10.0.0.0/8", "IPAM_CONDUIT_PREFIX_LENGTH_IPV4=12", "IPAM_NODE_PREFIX_LENGTH_IPV4=16")
	var ids []childID
	for i := 0; i < 10000; i++ {
		ids = append(ids, childID{ipamv1.IPFamily_IPV4, fmt.Sprintf("conduit-%d", i%4), fmt.Sprintf("worker-%d", i%10), fmt.Sprintf("pod-%d-proxy.conduit.trench.ns-0-src", i)})
	}
	b.ResetTimer()
	allocateAll(b, p.client, ids)
	b.StopTimer()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	require.NoError(b, err)
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.Atoi(f[1])
			require.NoError(b, err)
			b.ReportMetric(float64(kb)/1024, "RSS-MiB")
		}
	}
	require.NoError(b, p.kill(b, syscall.SIGTERM))
}
