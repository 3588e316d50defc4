package labtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
)

// childEnv names a copy of a test binary a child and carries its
// configuration as JSON (one name serves every package: each has its own
// binary).
const childEnv = "CAUSEWAY_LABTEST_CHILD"

// ChildExitDeadline bounds Child.Wait: far above any stub's stop, it only
// turns a child that never exits into a failure with the child's stacks.
const ChildExitDeadline = time.Minute

// Child is a stub run by StartChild as a process of its own.
type Child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited; err is set
	err  error
}

// StartChild runs a copy of the test binary inside ns (`ip netns exec`, as
// the lab starts a stub), handing it cfg in its environment; the child's
// TestMain passes it to RunChild. The clean-up kills the process, if it still
// runs, and waits for it.
func StartChild[C any](t *testing.T, ns *testutil.NetNS, cfg C) *Child {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatalf("child config: %v", err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns.Name, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	c := &Child{cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.done
	})
	return c
}

// Signal sends sig to the child.
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Wait returns how the child exited (nil: status 0); any number of callers
// may wait. A child still running after ChildExitDeadline is sent SIGQUIT,
// which prints its goroutines on the test's stderr, and Wait fails.
func (c *Child) Wait(t *testing.T) error {
	t.Helper()
	select {
	case <-c.done:
		return c.err
	case <-time.After(ChildExitDeadline):
	}
	_ = c.cmd.Process.Signal(syscall.SIGQUIT)
	<-c.done
	t.Fatalf("the child did not exit within %v: its goroutines are above", ChildExitDeadline)
	return nil
}

// StubMain is the TestMain of a stub package whose tests also run the stub
// as a child process (StartChild): RunChild with run, then Main.
func StubMain[C any](m *testing.M, what string, run func(ctx context.Context, cfg C) error) {
	RunChild(what, run)
	Main(m)
}

// RunChild is the child's side of StartChild, called first in TestMain: in
// a child it quiets the NSM SDK's logs, runs run with the configuration
// until SIGTERM or SIGINT and exits the process, with status 0 when run
// returns nil, 1 when it fails and 2 when the configuration cannot be read.
// Elsewhere it returns at once.
func RunChild[C any](what string, run func(ctx context.Context, cfg C) error) {
	raw := os.Getenv(childEnv)
	if raw == "" {
		return
	}
	controlplane.QuietSDKLogs()
	os.Exit(runChild(raw, what, run))
}

func runChild[C any](raw, what string, run func(context.Context, C) error) int {
	var cfg C
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 1
	}
	return 0
}
