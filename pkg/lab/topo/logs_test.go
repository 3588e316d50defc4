package topo_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// TestDownKeepsTheLogs: Down removes the run but leaves its logs in
// <base>/logs/<id>, with the run's record (how each process ended); of the
// finished runs of a base only the last topo.KeptLogs keep theirs, and the
// logs of a run still recorded are never pruned.
func TestDownKeepsTheLogs(t *testing.T) {
	testutil.RequireRoot(t) // StartProcess, as the lab
	base := t.TempDir()
	live, err := topo.NewRun(base)
	require.NoError(t, err)
	t.Cleanup(func() { _ = live.Down(time.Second) })
	require.Error(t, startLogged(t, live, "old but recorded").Wait())
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(live.LogDir(), old, old))

	var ids []string
	for i := range topo.KeptLogs + 2 {
		run, err := topo.NewRun(base)
		require.NoError(t, err)
		require.Equal(t, filepath.Join(base, "logs", run.ID()), run.LogDir())
		require.Equal(t, run.LogDir(), topo.LogDir(base, run.ID()))
		cmd := startLogged(t, run, "run "+run.ID())
		require.Error(t, cmd.Wait(), "it ends with status 3")
		require.NoError(t, run.RecordExit(cmd.Process.Pid, topo.ExitOf(cmd.ProcessState, "")))
		require.NoError(t, run.Down(time.Second))

		_, err = os.Stat(run.Dir)
		require.True(t, os.IsNotExist(err), "the run directory goes")
		data, err := os.ReadFile(filepath.Join(run.LogDir(), "writer.log"))
		require.NoError(t, err, "round %d: the log stays", i)
		require.Equal(t, "run "+run.ID()+"\n", string(data))
		var rec topo.State
		data, err = os.ReadFile(filepath.Join(run.LogDir(), "run-state.json"))
		require.NoError(t, err, "the run's record stays with its logs")
		require.NoError(t, json.Unmarshal(data, &rec))
		require.Len(t, rec.Processes, 1)
		require.NotNil(t, rec.Processes[0].Exit, "how the process ended")
		require.Equal(t, 3, rec.Processes[0].Exit.Code)
		ids = append(ids, run.ID())
	}

	runs, err := topo.ListRuns(base)
	require.NoError(t, err)
	require.Equal(t, []string{live.ID()}, runs, "kept logs are no run")
	entries, err := os.ReadDir(filepath.Join(base, "logs"))
	require.NoError(t, err)
	var kept []string
	for _, e := range entries {
		kept = append(kept, e.Name())
	}
	want := append([]string{live.ID()}, ids[len(ids)-topo.KeptLogs:]...)
	require.ElementsMatch(t, want, kept, "the running run's and the last %d finished runs' logs", topo.KeptLogs)

	require.NoError(t, live.Down(time.Second))
	_, err = os.Stat(filepath.Join(live.LogDir(), "writer.log"))
	require.NoError(t, err, "the last run down keeps its logs")
}

// startLogged starts a process of run that writes line to its log and
// ends with status 3; the caller waits for it.
func startLogged(t *testing.T, run *topo.Run, line string) *exec.Cmd {
	t.Helper()
	cmd, err := run.StartProcess("", "writer", []string{"sh", "-c", "echo " + line + "; exit 3"}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		data, _ := os.ReadFile(filepath.Join(run.LogDir(), "writer.log"))
		return strings.Contains(string(data), line)
	}, time.Minute, 20*time.Millisecond, "the process logs to the run's log directory")
	return cmd
}
