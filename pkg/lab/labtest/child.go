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

	"github.com/causeway-net/causeway/internal/nsmcp"
	"github.com/causeway-net/causeway/internal/testutil"
)

// childEnv names a copy of a test binary a child and carries its
// configuration as JSON (one name serves every package: each has its own
// binary).
const childEnv = "CAUSEWAY_LABTEST_CHILD"

// StartChild runs a copy of the test binary inside ns (`ip netns exec`, as
// the lab starts a stub), handing it cfg in its environment; the child's
// TestMain passes it to RunChild. exited gets the process's end once; a
// test that reads it puts a value back for the clean-up, which kills the
// process and waits for it.
func StartChild[C any](t *testing.T, ns *testutil.NetNS, cfg C) (cmd *exec.Cmd, exited chan error) {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatalf("child config: %v", err)
	}
	cmd = exec.Command("ip", "netns", "exec", ns.Name, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	exited = make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return cmd, exited
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
	nsmcp.QuietSDKLogs()
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
