package labrun

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/netnsdo"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// labBinaries builds the binaries a lab runs into a temporary directory of t
// and returns that directory.
func labBinaries(t *testing.T) string {
	t.Helper()
	bins := testutil.BuildBinaries(t, "./cmd/proxy", "./cmd/ipam", "./cmd/nsp", "./cmd/lab")
	return filepath.Dir(bins["lab"])
}

// requireGone asserts that nothing of the run is left: no namespace with the
// run's prefix, no recorded process, no run directory.
func requireGone(t *testing.T, id, dir string, procs []topo.Process) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	require.NoError(t, err, string(out))
	require.NotContains(t, string(out), "cw"+id+"-", "no namespace of the run may remain")
	for _, p := range procs {
		// A process killed at the end of Down may take a moment to be reaped.
		require.Eventually(t, func() bool { return !topo.Alive(p.PID, p.StartTime) }, time.Minute, 50*time.Millisecond,
			"process %s (%d) must be gone", p.Name, p.PID)
	}
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err), "run directory %s must be gone", dir)
}

// requireNoMarked asserts that no process carrying the run's marker (see
// topo.MarkerEnv) runs: none it started is left, recorded or not.
func requireNoMarked(t *testing.T, l *Lab) {
	t.Helper()
	left, err := l.run.MarkedProcesses()
	require.NoError(t, err)
	require.Empty(t, left, "no process of the run may remain")
}

// forgetProcess rewrites the run's record (topo's state.json in dir)
// without the process pid, as a crash between its start and its record
// leaves it.
func forgetProcess(t *testing.T, dir string, pid int) {
	t.Helper()
	path := filepath.Join(dir, "state.json")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var s topo.State
	require.NoError(t, json.Unmarshal(data, &s))
	n := len(s.Processes)
	s.Processes = slices.DeleteFunc(s.Processes, func(p topo.Process) bool { return p.PID == pid })
	require.Len(t, s.Processes, n-1, "process %d was recorded", pid)
	data, err = json.Marshal(&s)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// dumpLogs logs the components' logs of a failed test.
func dumpLogs(t *testing.T, l *Lab) {
	entries, _ := os.ReadDir(l.run.LogDir())
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(l.run.LogDir(), e.Name()))
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		t.Logf("---- %s (tail) ----\n%s", e.Name(), data)
	}
}

// testLab brings a default lab of the real binaries up in a run base of
// its own, and tears it down at the end of the test, even when it fails
// (then with its components' logs in the test's). ctx ends after timeout;
// bin holds the binaries.
func testLab(t *testing.T, timeout time.Duration) (l *Lab, ctx context.Context, bin, base string) {
	t.Helper()
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	bin = labBinaries(t)
	base = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	l, err := Up(ctx, Options{BinDir: bin, RunBase: base, ReleaseDelay: 2 * time.Second, NSEExpiration: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, l)
		}
		require.NoError(t, l.Down(), "down (again: harmless)")
	})
	return l, ctx, bin, base
}

// TestUpCheckDown brings a default lab up with the real binaries, waits for
// every check to pass, and tears it down without leaving anything.
func TestUpCheckDown(t *testing.T) {
	l, ctx, _, base := testLab(t, 3*time.Minute)
	var err error
	require.Len(t, l.Targets(), 3)
	require.Equal(t, []string{"lb-a", "lb-b"}, l.LBs())

	var rep Report
	require.Eventually(t, func() bool {
		rep, err = l.Check(ctx)
		return err == nil && rep.OK()
	}, 2*time.Minute, time.Second, "checks must turn green")
	var b strings.Builder
	rep.Print(&b)
	t.Logf("checks:\n%s", b.String())
	require.Len(t, rep.Rows, 1+3+1+1+3+4+1+2*len(LabServices),
		"components, one row per target (2), bridge ports, routes, one per VIP, protocol, LB replies, one per service and protocol")

	// The service checks see which UDP flows the proxy's conntrack still
	// tracks, so that each of their flows is a new one for the balancer.
	echo := LabServices[0].Addr()
	tracked := l.udpTracked(echo)
	require.NoError(t, netnsdo.DoPath(l.NetNSPath("target-1"), func() error {
		c, err := net.DialUDP("udp", &net.UDPAddr{Port: 20001}, net.UDPAddrFromAddrPort(echo))
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("hello\n")); err != nil {
			return err
		}
		_, err = bufio.NewReader(c).ReadString('\n')
		return err
	}))
	from := l.TargetAddrs("target-1")[0].Addr()
	old, err := tracked(netip.AddrPortFrom(from, 20001))
	require.NoError(t, err)
	require.True(t, old, "the flow from port 20001 is tracked in the proxy")
	old, err = tracked(netip.AddrPortFrom(from, 20002))
	require.NoError(t, err)
	require.False(t, old, "no flow came from port 20002")

	// A client on the external host that binds no address (curl, a shell)
	// is answered on every connection, whichever LB its reply comes back
	// through: the VIP routes prefer the client addresses both LBs route.
	for _, vip := range []string{"203.0.113.1", "2001:db8:20::1"} {
		addr := net.JoinHostPort(vip, "5000")
		require.NoError(t, netnsdo.DoPath(l.NetNSPath("ext"), func() error {
			for i := range 32 {
				c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
				if err != nil {
					return fmt.Errorf("connection %d to %s: %w", i, addr, err)
				}
				_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
				line, err := bufio.NewReader(c).ReadString('\n')
				_ = c.Close()
				if err != nil || !strings.HasPrefix(line, "target-") {
					return fmt.Errorf("connection %d to %s: %q, %v", i, addr, line, err)
				}
			}
			return nil
		}))
	}

	// The accessors scenarios use.
	for _, tg := range l.Targets() {
		addrs := l.TargetAddrs(tg)
		require.Len(t, addrs, 2, "target %s: one address per family", tg)
		require.Equal(t, 24, addrs[0].Bits(), "the node prefix length of the IPAM")
	}
	debug, err := l.ProxyDebug(ctx)
	require.NoError(t, err)
	require.Contains(t, string(debug), `"bridgeAddrs"`)
	out, err := l.Exec("proxy", "ip", "-br", "link", "show", "master", "bridge0")
	require.NoError(t, err)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 5, "2 LBs and 3 targets on the bridge: %s", out)
	var status strings.Builder
	notRunning, err := l.Status(&status)
	require.NoError(t, err)
	require.Empty(t, notRunning, "every component runs:\n%s", status.String())
	require.Contains(t, status.String(), "proxy")
	require.Contains(t, status.String(), "from 203.0.113.1 lookup 1")

	// Another process sees the run.
	other, err := Open(base, "")
	require.NoError(t, err)
	require.Equal(t, l.ID(), other.ID())
	require.Equal(t, l.Targets(), other.Targets())

	procs := l.run.State().Processes
	require.Len(t, procs, 1+2+2+1+3, "nsm, nsp, ipam, 2 LBs, proxy, 3 targets")
	require.NoError(t, l.Down())
	require.NoError(t, l.Down(), "down twice is harmless")
	requireGone(t, l.ID(), l.RunDir(), procs)
	requireNoMarked(t, l)
}

// TestDownAfterCrash kills a `lab run` process (the owner of the NSM control
// plane) with SIGKILL once its lab is up, and tears the run down from here.
func TestDownAfterCrash(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	bin := labBinaries(t)
	base := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "lab"), "run", "-run-base", base, "-timeout", "1s")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		for range lines {
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	// Wait until the lab is up (its run is recorded and the proxy started).
	var l *Lab
	require.Eventually(t, func() bool {
		l, err = Open(base, "")
		if err != nil {
			return false
		}
		for _, p := range l.run.State().Processes {
			if strings.HasPrefix(p.Name, "target-") {
				return true
			}
		}
		return false
	}, 2*time.Minute, 100*time.Millisecond, "lab run must bring a lab up")
	require.NoError(t, cmd.Process.Kill())
	<-exited

	// A component that the crashed process had started but not recorded
	// yet (the kill came between the two): one started by the same path,
	// whose record is then dropped.
	l, err = Open(base, l.ID())
	require.NoError(t, err)
	unrecorded, err := l.run.StartProcess(l.NetNS("target-1"), "target-unrecorded", []string{"sleep", "300"}, nil)
	require.NoError(t, err)
	exitedUnrecorded := make(chan struct{})
	go func() {
		_ = unrecorded.Wait()
		close(exitedUnrecorded)
	}()
	t.Cleanup(func() {
		_ = unrecorded.Process.Kill()
		<-exitedUnrecorded
	})
	forgetProcess(t, l.RunDir(), unrecorded.Process.Pid)

	// Reopen after the crash: the components still run; Down removes all,
	// the unrecorded one too.
	l, err = Open(base, l.ID())
	require.NoError(t, err)
	procs := l.run.State().Processes
	require.NotEmpty(t, procs)
	for _, p := range procs {
		require.NotEqual(t, unrecorded.Process.Pid, p.PID, "the run has no record of it")
	}
	var log testutil.SyncBuffer
	l.log = slog.New(slog.NewTextHandler(&log, nil))
	require.NoError(t, l.Down())
	t.Logf("down logged:\n%s", log.String())
	requireGone(t, l.ID(), l.RunDir(), procs)
	requireNoMarked(t, l)
	require.False(t, topo.Running(unrecorded.Process.Pid), "the unrecorded process must be gone")
	require.Contains(t, log.String(), fmt.Sprintf("pid=%d ", unrecorded.Process.Pid), "Down logs what it found unrecorded")
	runs, err := List(base)
	require.NoError(t, err)
	require.Empty(t, runs)
}
