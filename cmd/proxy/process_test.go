package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
)

// process is a binary run in a network namespace with `ip netns exec`, which
// execs it: the pid is the binary's.
type process struct {
	name string
	cmd  *exec.Cmd
	log  testutil.JSONLog // stdout and stderr (JSON log lines)
	done chan struct{}
	err  error // Wait's result, set before done is closed
}

// startProcess runs bin in ns with exactly env (plus PATH). It is killed at
// the end of the test if still running, and its output is logged when the
// test failed.
func startProcess(t testing.TB, name string, ns *testutil.NetNS, bin string, env ...string) *process {
	t.Helper()
	p := &process{name: name, done: make(chan struct{})}
	p.cmd = exec.Command("ip", "netns", "exec", ns.Name, bin)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	p.cmd.Stdout = &p.log
	p.cmd.Stderr = &p.log
	require.NoError(t, p.cmd.Start(), "start %s", name)
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("---- %s output ----\n%s---- end of %s output ----", p.name, p.log.String(), p.name)
		}
	})
	return p
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig and waits for the exit; it returns the exit code.
func (p *process) stop(t testing.TB, sig syscall.Signal) int {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	select {
	case <-p.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("%s did not exit on %s", p.name, sig)
	}
	return p.cmd.ProcessState.ExitCode()
}

// logLines returns the JSON log lines printed so far.
func (p *process) logLines() []map[string]any { return p.log.Lines() }

// waitLog waits until a log line has the message msg (and the attributes
// given as key, value pairs) and returns it; it fails if the process exits
// first.
func (p *process) waitLog(t testing.TB, msg string, attrs ...string) map[string]any {
	t.Helper()
	line, i := p.log.Wait(90*time.Second, p.done, 0, msg, attrs...)
	if i < 0 && p.exited() {
		t.Fatalf("%s exited (%v) before logging %q", p.name, p.err, msg)
	}
	if i < 0 {
		t.Fatalf("%s did not log %q %v", p.name, msg, attrs)
	}
	return line
}

// rssKiB reads the resident set size of the process.
func (p *process) rssKiB() (int, error) { return p.statusKiB("VmRSS") }

// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100
// on every Linux ABI the project builds for).
const userHZ = 100

// cpuTime reads the CPU time the process has used in user space (its own
// code) and in the kernel (its system calls).
func (p *process) cpuTime() (user, sys time.Duration, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	// The fields after the command name, which is in parentheses: utime
	// and stime are the 14th and 15th of the line, so the 12th and 13th
	// after it.
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data)[i+1:])
	if i < 0 || len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected %q", p.cmd.Process.Pid, data)
	}
	var ticks [2]int64
	for j, v := range f[11:13] {
		if ticks[j], err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/stat: %w", p.cmd.Process.Pid, err)
		}
	}
	return time.Duration(ticks[0]) * time.Second / userHZ, time.Duration(ticks[1]) * time.Second / userHZ, nil
}

// statusKiB reads the field key (VmRSS, VmHWM, ...) of the process's
// /proc status, in KiB.
func (p *process) statusKiB(key string) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			return strconv.Atoi(f[0])
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, p.cmd.Process.Pid)
}
