package health

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestProbeFollowsProbeServices(t *testing.T) {
	c := New(WithLogger(quiet))
	_, path := serveUnix(t, c)
	c.Register(Readiness, IPAMCli)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()

	require.NoError(t, probeErr(ctx, path, "startup"))
	require.NoError(t, probeErr(ctx, "unix://"+path, "LIVENESS"))
	require.ErrorContains(t, probeErr(ctx, path, "readiness"), "NOT_SERVING")
	c.Register(Readiness, NSPCli)
	c.SetServing(NSPCli, true)
	require.EqualError(t, probeErr(ctx, path, "readiness", IPAMCli, NSPCli),
		"Readiness probe on "+path+": NOT_SERVING (not serving: IPAMCli)", "the failing subservice is named")
	c.SetServing(IPAMCli, true)
	require.NoError(t, probeErr(ctx, path, "readiness"))
}

// probeErr is Probe's error alone.
func probeErr(ctx context.Context, path, kind string, explain ...string) error {
	_, err := Probe(ctx, path, kind, explain...)
	return err
}

func TestProbeFailsWithoutServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := probeErr(ctx, filepath.Join(t.TempDir(), "absent.sock"), "liveness")
	require.ErrorContains(t, err, "Liveness probe")
}

func TestProbeRejectsUnknownKind(t *testing.T) {
	_, err := ProbeService("ready")
	require.ErrorContains(t, err, "want startup, readiness or liveness")
}
