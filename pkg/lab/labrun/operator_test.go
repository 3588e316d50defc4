package labrun

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOperatorCommands drives a lab as an operator does, with `lab` from
// another process: `lab status` shows a component that crashed and how,
// and exits 1 while one the run expects is down (not for one stopped with
// `lab stop`); `lab restart` returns once the lab's checks pass again, or
// says that the lab did not settle; the teardown keeps the logs. No
// component logs that NSM's pod environment is missing.
func TestOperatorCommands(t *testing.T) {
	l, ctx, bin, base := testLab(t, 5*time.Minute)
	lab := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "lab"), append([]string{args[0], "-run-base", base}, args[1:]...)...)
		out, err := cmd.CombinedOutput()
		if err != nil && cmd.ProcessState == nil {
			t.Fatalf("lab %v: %v", args, err)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	_, err := l.WaitGreen(ctx, 2*time.Minute, testWriter{t})
	require.NoError(t, err, "up")
	code, out := lab("status")
	require.Equal(t, 0, code, out)
	require.Regexp(t, `(?m)^target-3\s+\d+\s+running\s+-\s+`, out)

	// An LB's datapath broken and mended: the status names it meanwhile.
	code, out = lab("break", "lb-a", "-loss", "5")
	require.Equal(t, 0, code, out)
	code, out = lab("status")
	require.Equal(t, 0, code, "a broken LB still runs: %s", out)
	require.Contains(t, out, "BROKEN: lb-a's datapath toward the proxy")
	code, out = lab("break", "lb-z")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `"lb-z" is no LB or target`)
	code, out = lab("break", "lb-a", "-loss", "200")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "loss 200 %")
	code, out = lab("mend", "lb-a")
	require.Equal(t, 0, code, out)
	_, out = lab("status")
	require.NotContains(t, out, "BROKEN")

	// A target crashes: the status names it and how it ended, the checks
	// fail on it, and a restart returns once they pass again.
	require.NoError(t, syscall.Kill(l.PID("target-3"), syscall.SIGKILL))
	<-l.proc("target-3").done
	code, out = lab("status")
	require.Equal(t, 1, code, out)
	require.Regexp(t, `(?m)^target-3\s+\d+\s+crashed\s+signal SIGKILL\s+`, out)
	require.Contains(t, out, "not running: target-3 (crashed: signal SIGKILL)")
	code, out = lab("check")
	require.Equal(t, 1, code, out)
	require.Regexp(t, `FAIL\s+components running\s+8 of 9 running; not running: target-3 \(crashed: signal SIGKILL\)`, out)
	code, out = lab("restart", "target-3")
	require.Equal(t, 0, code, out)
	rep, err := l.Check(ctx)
	require.NoError(t, err)
	require.True(t, rep.OK(), "the lab has settled when restart returns:\n%s\n%s", out, printed(rep))
	require.Contains(t, out, "restart target-3: all")

	// A component stopped on request is not down.
	code, out = lab("stop", "lb-b", "-grace", "10s")
	require.Equal(t, 0, code, out)
	code, out = lab("status")
	require.Equal(t, 0, code, out)
	require.Regexp(t, `(?m)^lb-b\s+\d+\s+stopped\s+exit 0\s+`, out)

	// With the IPAM down, a restart cannot settle: it says so and why.
	require.NoError(t, syscall.Kill(l.PID("ipam"), syscall.SIGKILL))
	<-l.proc("ipam").done
	code, out = lab("restart", "-timeout", "3s", "nsp")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "restart nsp: the lab did not settle")
	require.Contains(t, out, "components running")
	code, out = lab("restart", "ipam")
	require.Equal(t, 0, code, out)
	code, out = lab("start", "lb-b")
	require.Equal(t, 0, code, out)
	code, out = lab("status")
	require.Equal(t, 0, code, out)

	for _, c := range l.Components() {
		data, err := os.ReadFile(l.Logs(c))
		require.NoError(t, err)
		require.NotContains(t, string(data), "is not set", "%s: NSM's pod environment (NODE_NAME...) is set", c)
	}

	// Down keeps the logs, out of the run directory. (Not `lab down`: it
	// would stop the run's owner, this test.)
	require.NoError(t, l.Down())
	_, err = os.Stat(l.RunDir())
	require.True(t, os.IsNotExist(err), "the run directory goes")
	data, err := os.ReadFile(l.Logs("target-3"))
	require.NoError(t, err, "the logs stay")
	require.Contains(t, string(data), "target stub", "the log of both runs of target-3")
	_, err = os.Stat(filepath.Join(l.LogDir(), "run-state.json"))
	require.NoError(t, err, "with the run's record")
}

func printed(r Report) string {
	var b strings.Builder
	r.Print(&b)
	return b.String()
}

// testWriter writes lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
