package main

import (
	"context"
	"errors"
	"log/slog"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/health"
)

// TestProbeFlag runs `proxy -probe KIND` (the chart's exec probes) against a
// health service on the socket NSM_HEALTH_SOCKET names: exit 0 while the
// probe service is serving, 1 when it is not or nothing answers, 2 for a
// kind that is no probe; a warning is printed with exit 0.
func TestProbeFlag(t *testing.T) {
	bin := testutil.BuildBinaries(t, "./cmd/proxy")["proxy"]
	sock := filepath.Join(t.TempDir(), "health.sock")
	var out []byte
	exitCode := func(kind string) int {
		cmd := exec.Command(bin, "-probe", kind, "-probe-timeout", "1s")
		cmd.Env = []string{"NSM_HEALTH_SOCKET=" + sock}
		var err error
		out, err = cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Logf("proxy -probe %s: %s", kind, out)
			return exit.ExitCode()
		}
		require.NoError(t, err)
		return 0
	}
	require.Equal(t, 1, exitCode("liveness"), "nothing listens yet")

	c := health.New(health.WithLogger(slog.New(slog.DiscardHandler)))
	c.Register(health.Readiness, health.Egress)
	lis, err := health.ListenUnix(sock)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx, lis) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	require.Equal(t, 0, exitCode("startup"))
	require.Equal(t, 0, exitCode("liveness"))
	require.Equal(t, 1, exitCode("readiness"), "Egress is not serving")
	c.SetServing(health.Egress, true)
	require.Equal(t, 0, exitCode("readiness"))
	require.Empty(t, out)
	c.RegisterWarning(health.Readiness, health.Datapath)
	c.SetWarning(health.Datapath, "nexthop 172.16.0.3 down")
	require.Equal(t, 0, exitCode("readiness"), "a warning is no failure")
	require.Equal(t, "Readiness: SERVING; warning: Datapath: nexthop 172.16.0.3 down\n", string(out))
	require.Equal(t, 2, exitCode("ready"), "not a probe kind")
}
