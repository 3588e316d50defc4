package labrun

import (
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// processLab is a lab that owns its run but has no network: its components
// are whatever processes a test starts in the host namespace.
func processLab(t *testing.T) (*Lab, string) {
	t.Helper()
	testutil.RequireRoot(t)
	base := t.TempDir()
	run, err := topo.NewRun(base)
	require.NoError(t, err)
	opts, err := Options{BinDir: t.TempDir(), RunBase: base, Targets: 2, LBs: []string{"lb-a"}}.withDefaults()
	require.NoError(t, err)
	l := &Lab{run: run, owner: true, log: slog.New(slog.DiscardHandler), out: io.Discard, procs: map[string]*proc{}}
	t.Cleanup(func() { require.NoError(t, l.Down()) })
	require.NoError(t, l.initState(opts))
	return l, base
}

// TestStatusShowsHowComponentsEnded: the status shows every component as
// running (pid) or how it ended, from the lab that runs it and from
// another process (the run's record); it names what the run expects to
// run and does not: a crashed component (killed from outside, or ended by
// itself with a failure) and one never started, not one the lab stopped
// or killed on request.
func TestStatusShowsHowComponentsEnded(t *testing.T) {
	l, base := processLab(t)
	sleep := []string{"sleep", "300"}
	for _, c := range []string{"nsm", "nsp", "ipam", "proxy", "target-1"} {
		require.NoError(t, l.startComponent(c, "", sleep, nil))
	}
	require.NoError(t, l.startComponent("target-2", "", []string{"sh", "-c", "exit 3"}, nil))
	<-l.proc("target-2").done
	require.NoError(t, syscall.Kill(l.PID("proxy"), syscall.SIGKILL), "a crash: nobody in the lab asked")
	<-l.proc("proxy").done
	require.NoError(t, l.StopComponent("target-1", 5*time.Second))
	require.NoError(t, l.kill("ipam"))
	nsmPID := l.PID("nsm")

	wantDown := []string{"proxy (crashed: signal SIGKILL)", "lb-a (not started)", "target-2 (crashed: exit 3)"}
	rows := map[string][]string{
		"nsm":      {"running", "-"},
		"ipam":     {"killed", "signal SIGKILL"},
		"proxy":    {"crashed", "signal SIGKILL"},
		"lb-a":     {"not started", "-"},
		"target-1": {"stopped", "signal SIGTERM"},
		"target-2": {"crashed", "exit 3"},
	}
	other, err := Open(base, l.ID())
	require.NoError(t, err)
	for who, lab := range map[string]*Lab{"the lab's owner": l, "another process": other} {
		var b strings.Builder
		down, err := lab.Status(&b)
		require.NoError(t, err)
		require.ElementsMatch(t, wantDown, down, "%s:\n%s", who, b.String())
		require.Contains(t, b.String(), "NOT RUNNING (expected to): ", who)
		for c, want := range rows {
			require.Regexp(t, `(?m)^`+c+`\s+\S+\s+`+want[0]+`\s+`+want[1]+`\s+`, b.String(), "%s: the row of %s", who, c)
		}
		require.Regexp(t, `(?m)^nsm\s+`+itoa(nsmPID)+`\s+running`, b.String(), "%s: a running component's pid", who)

		lbs, targets := lab.expected(lab.ComponentStates())
		require.Equal(t, []string{"lb-a"}, lbs, "%s: the checks expect what is not stopped", who)
		require.Equal(t, []string{"target-2"}, targets, who)
	}

	// Restarted, the crashed components run again; the status is clean
	// once the one never started runs too.
	for _, c := range []string{"proxy", "target-2", "lb-a"} {
		require.NoError(t, l.startComponent(c, "", sleep, nil))
	}
	require.NoError(t, other.refresh())
	for _, lab := range []*Lab{l, other} {
		down, err := lab.Status(io.Discard)
		require.NoError(t, err)
		require.Empty(t, down)
	}
}

// TestComponentsRunAsPodsOfTheLabNode: every component has the pod
// environment NSM reads (NODE_NAME, POD_NAME, CLUSTER_NAME), the node
// being the lab's one node.
func TestComponentsRunAsPodsOfTheLabNode(t *testing.T) {
	l, _ := processLab(t)
	for _, c := range []string{"nsm", "proxy"} {
		require.NoError(t, l.startComponent(c, "", []string{"sleep", "300"}, []string{"POD_NAME=overridden-" + c}))
	}
	env := func(c string) []string {
		data, err := os.ReadFile("/proc/" + itoa(l.PID(c)) + "/environ")
		require.NoError(t, err)
		return strings.Split(string(data), "\x00")
	}
	for _, c := range []string{"nsm", "proxy"} {
		e := env(c)
		require.Contains(t, e, "NODE_NAME="+NodeName, c)
		require.Contains(t, e, "CLUSTER_NAME=lab-"+l.ID(), c)
		require.Equal(t, "overridden-"+c, lastValue(e, "POD_NAME"), "%s: the component's own settings come last", c)
	}
	require.Equal(t, "proxy-"+l.ID(), l.podName("proxy"), "the proxy's pod is its NSM_NAME")
}

func lastValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

func itoa(i int) string { return strconv.Itoa(i) }
