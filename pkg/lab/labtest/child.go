package labtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/lab/nsmcp"
)

// childSpec is what the parent hands to the child, in the environment.
type childSpec[C any] struct {
	Config   C
	NSMgrURL string
}

// StartChild runs a copy of the test binary inside ns (`ip netns exec`, as
// the lab starts a stub), with env naming it a child and carrying cfg and
// the NSMgr URL; the child's TestMain hands them to RunChild. exited gets the
// process's end once; a test that reads it puts a value back for the
// clean-up, which kills the process and waits for it.
func StartChild[C any](t *testing.T, ns *testutil.NetNS, env string, nsmgrURL *url.URL, cfg C) (cmd *exec.Cmd, exited chan error) {
	t.Helper()
	raw, err := json.Marshal(childSpec[C]{Config: cfg, NSMgrURL: nsmgrURL.String()})
	if err != nil {
		t.Fatalf("child config: %v", err)
	}
	cmd = exec.Command("ip", "netns", "exec", ns.Name, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+string(raw))
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

// RunChild is the child's side of StartChild, called first in TestMain: in
// a child (env set) it quiets the NSM SDK's logs, runs run with the
// configuration and the NSMgr URL until SIGTERM or SIGINT and exits the
// process, with status 0 when run
// returns nil, 1 when it fails and 2 when the configuration cannot be read.
// Elsewhere it returns at once.
func RunChild[C any](env, what string, run func(ctx context.Context, cfg C, nsmgrURL *url.URL) error) {
	raw := os.Getenv(env)
	if raw == "" {
		return
	}
	nsmcp.QuietSDKLogs()
	os.Exit(runChild(raw, what, run))
}

func runChild[C any](raw, what string, run func(context.Context, C, *url.URL) error) int {
	var spec childSpec[C]
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	u, err := url.Parse(spec.NSMgrURL)
	if err != nil || u.Scheme != "unix" {
		fmt.Fprintf(os.Stderr, "child config: not a unix url: %q\n", spec.NSMgrURL)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, spec.Config, u); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 1
	}
	return 0
}
