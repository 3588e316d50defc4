package topo_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// twoRuns makes two runs in one base directory (root only).
func twoRuns(t *testing.T) (string, *topo.Run, *topo.Run) {
	t.Helper()
	testutil.RequireRoot(t)
	base := t.TempDir()
	run, err := topo.NewRun(base)
	require.NoError(t, err)
	other, err := topo.NewRun(base)
	require.NoError(t, err)
	return base, run, other
}

func TestRunRecordsAndTearsDownAfterCrash(t *testing.T) {
	base, run, other := twoRuns(t)
	require.NotEqual(t, run.ID(), other.ID())
	require.NotEqual(t, run.NetNSName("lb-a"), other.NetNSName("lb-a"))
	require.NoError(t, other.Down(time.Second))

	// Safety net if the test fails before Down.
	t.Cleanup(func() {
		for _, n := range run.State().NetNS {
			_ = exec.Command("ip", "netns", "del", n).Run()
		}
	})
	a, err := run.AddNetNS("a")
	require.NoError(t, err)
	b, err := run.AddNetNS("b")
	require.NoError(t, err)
	require.NoError(t, topo.AddVeth(
		topo.VethEnd{NetNSPath: a, Name: "to-b", Addrs: []netip.Prefix{netip.MustParsePrefix("10.1.0.1/30")}},
		topo.VethEnd{NetNSPath: b, Name: "to-a", Addrs: []netip.Prefix{netip.MustParsePrefix("10.1.0.2/30")}}))
	out, err := exec.Command("ip", "netns", "exec", run.NetNSName("a"), "ping", "-c1", "-W2", "10.1.0.2").CombinedOutput()
	require.NoError(t, err, string(out))
	require.NoError(t, topo.Sysctl(a, "net.ipv4.ip_forward", "1"))
	out, err = exec.Command("ip", "netns", "exec", run.NetNSName("a"), "cat", "/proc/sys/net/ipv4/ip_forward").CombinedOutput()
	require.NoError(t, err)
	require.Equal(t, "1", strings.TrimSpace(string(out)))

	// A root-namespace link, a process inside a namespace and a file.
	rootLink := "cw" + run.ID() + "x"
	attrs := netlink.NewLinkAttrs()
	attrs.Name = rootLink
	require.NoError(t, netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: rootLink + "p"}))
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(rootLink); err == nil {
			_ = netlink.LinkDel(l)
		}
	})
	require.NoError(t, run.RecordLink(topo.Link{Name: rootLink}))
	cmd, err := run.StartProcess(run.NetNSName("b"), "sleeper", []string{"sh", "-c", "echo in $(ip netns identify); exec sleep 300"}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		data, _ := os.ReadFile(filepath.Join(run.LogDir(), "sleeper.log"))
		return strings.TrimSpace(string(data)) == "in "+run.NetNSName("b")
	}, time.Minute, 50*time.Millisecond, "the process runs in its namespace and logs to the run")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	file := filepath.Join(t.TempDir(), "extra")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	require.NoError(t, run.RecordFile(file))

	// "Crash": a new process only knows the base and the id.
	ids, err := topo.ListRuns(base)
	require.NoError(t, err)
	require.Equal(t, []string{run.ID()}, ids)
	again, err := topo.OpenRun(base, run.ID())
	require.NoError(t, err)
	require.ElementsMatch(t, []string{run.NetNSName("a"), run.NetNSName("b")}, again.State().NetNS)
	require.NoError(t, again.Down(5*time.Second))

	<-done
	for _, n := range []string{run.NetNSName("a"), run.NetNSName("b")} {
		_, err := netns.GetFromName(n)
		require.Error(t, err, "namespace %s must be gone", n)
	}
	_, err = netlink.LinkByName(rootLink)
	require.Error(t, err)
	_, err = os.Stat(file)
	require.True(t, os.IsNotExist(err))
	_, err = os.Stat(run.Dir)
	require.True(t, os.IsNotExist(err))
	ids, err = topo.ListRuns(base)
	require.NoError(t, err)
	require.Empty(t, ids)
	require.NoError(t, again.Down(time.Second), "down twice is harmless")
}

// TestRunRemovesTheEmptyDirsItMade: the directories a run records as made
// by it (missing before) go at Down when they are empty; one that someone
// else filled meanwhile stays, and one that existed before is not recorded.
func TestRunRemovesTheEmptyDirsItMade(t *testing.T) {
	base := t.TempDir()
	existing := t.TempDir()
	for _, filled := range []bool{false, true} {
		run, err := topo.NewRun(base)
		require.NoError(t, err)
		made := filepath.Join(existing, "var", "lib", "nsm", "config")
		require.NoError(t, run.RecordMissingDirs(made))
		require.Equal(t, []string{filepath.Join(existing, "var"), filepath.Join(existing, "var", "lib"),
			filepath.Join(existing, "var", "lib", "nsm"), made}, run.State().EmptyDirs)
		require.NoError(t, os.MkdirAll(made, 0o755))
		other, err := topo.NewRun(base)
		require.NoError(t, err)
		require.NoError(t, other.RecordMissingDirs(made))
		require.Empty(t, other.State().EmptyDirs, "nothing missing: nothing recorded")
		require.NoError(t, other.Down(time.Second))
		_, err = os.Stat(made)
		require.NoError(t, err, "the other run made none of it")
		if filled {
			require.NoError(t, os.WriteFile(filepath.Join(made, "excluded_prefixes.yaml"), []byte("prefixes: []\n"), 0o600))
		}

		require.NoError(t, run.Down(time.Second))
		_, err = os.Stat(filepath.Join(existing, "var"))
		if filled {
			require.NoError(t, err, "a directory someone filled stays")
			_, err = os.Stat(filepath.Join(made, "excluded_prefixes.yaml"))
			require.NoError(t, err)
			require.NoError(t, os.RemoveAll(filepath.Join(existing, "var")))
		} else {
			require.True(t, os.IsNotExist(err), "the empty directories the run made go: %v", err)
		}
		_, err = os.Stat(existing)
		require.NoError(t, err, "what existed before stays")
	}
}

// TestDownStopsUnrecordedProcesses: a process the run started whose record
// never reached the state (a crash between start and record), and what it
// started, are stopped by Down from another process, found by the run's
// marker; a process of another run and unrelated ones are left alone.
func TestDownStopsUnrecordedProcesses(t *testing.T) {
	base, run, other := twoRuns(t)
	start := func(cmd *exec.Cmd) *exec.Cmd {
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		return cmd
	}

	// The run's process starts a child of its own (that child carries the
	// marker too), then execs; the crash loses its record.
	unrecorded, err := run.StartProcess("", "unrecorded", []string{"sh", "-c", "sleep 300 & exec sleep 301"}, nil)
	require.NoError(t, err)
	start(unrecorded)
	t.Cleanup(func() { // the child, if Down failed to stop it
		if left, err := run.MarkedProcesses(); err == nil {
			for _, p := range left {
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
	})
	dropProcessRecords(t, run)
	var marked []topo.Process
	require.Eventually(t, func() bool {
		marked, err = run.MarkedProcesses()
		return err == nil && len(marked) == 2
	}, time.Minute, 20*time.Millisecond, "the process and its child carry the run's marker")
	require.Contains(t, pids(marked), unrecorded.Process.Pid)

	// Another run's process, one whose marker only begins like the run's
	// and one without a marker.
	others, err := other.StartProcess("", "other", []string{"sleep", "302"}, nil)
	require.NoError(t, err)
	start(others)
	lookalike := exec.Command("sleep", "303")
	lookalike.Env = append(os.Environ(), topo.MarkerEnv+"="+run.Marker()+"0")
	require.NoError(t, lookalike.Start())
	start(lookalike)
	plain := exec.Command("sleep", "304")
	require.NoError(t, plain.Start())
	start(plain)

	again, err := topo.OpenRun(base, run.ID())
	require.NoError(t, err)
	require.Empty(t, again.State().Processes, "the run recorded no process")
	var log testutil.SyncBuffer
	again.Log = slog.New(slog.NewTextHandler(&log, nil))
	require.NoError(t, again.Down(5*time.Second))

	for _, p := range marked {
		require.False(t, topo.Running(p.PID), "process %d (%s) of the run must be gone", p.PID, p.Name)
		require.Contains(t, log.String(), fmt.Sprintf("pid=%d ", p.PID), "Down logs what it found unrecorded")
	}
	left, err := run.MarkedProcesses()
	require.NoError(t, err)
	require.Empty(t, left)
	for _, c := range []*exec.Cmd{others, lookalike, plain} {
		require.True(t, topo.Running(c.Process.Pid), "%v is not the run's and must still run", c.Args)
	}
	require.NoError(t, other.Down(5*time.Second))
	require.False(t, topo.Running(others.Process.Pid))
}

// dropProcessRecords rewrites the run's state without its processes, as a
// crash between a start and its record leaves it.
func dropProcessRecords(t *testing.T, run *topo.Run) {
	t.Helper()
	path := filepath.Join(run.Dir, "state.json")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var s topo.State
	require.NoError(t, json.Unmarshal(data, &s))
	require.NotEmpty(t, s.Processes)
	s.Processes = nil
	data, err = json.Marshal(&s)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

func pids(procs []topo.Process) []int {
	var out []int
	for _, p := range procs {
		out = append(out, p.PID)
	}
	return out
}
