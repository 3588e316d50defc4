package main

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
)

// TestProxyBinaryFollowsSignals runs the proxy binary alone (its IPAM is
// unreachable, so it waits for its bridge addresses): SIGUSR2 switches its
// log to TRACE and SIGUSR1 back to NSM_LOG_LEVEL, and SIGHUP stops it (the
// process exits by itself instead of being killed by the signal).
func TestProxyBinaryFollowsSignals(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("builds and runs the proxy binary")
	}
	bin := testutil.BuildBinaries(t, "./cmd/proxy")["proxy"]
	ns := testutil.NewNetNS(t, "proxy")
	dir := t.TempDir()
	p := startProcess(t, "proxy", ns, bin,
		"NSM_INSECURE=true",
		"NSM_CONNECT_TO=unix://"+filepath.Join(dir, "nsm.sock"),
		"NSM_IPAM_SERVICE=127.0.0.1:1",
		"NSM_VIP_FILE="+filepath.Join(dir, "vips.yaml"),
		"NSM_HEALTH_SOCKET="+filepath.Join(dir, "health.sock"),
		"NSM_DEBUG_SOCKET="+filepath.Join(dir, "debug.sock"),
		"NSM_BRIDGE_MAC_FILE="+filepath.Join(dir, "bridge.mac"),
		"NSM_METRICS_ADDRESS=",
		"NSM_LOG_LEVEL=INFO",
	)
	p.waitLog(t, "allocating bridge addresses")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGUSR2))
	p.waitLog(t, "log level changed", "level", "TRACE")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGUSR1))
	p.waitLog(t, "log level changed", "level", "INFO")

	code := p.stop(t, syscall.SIGHUP)
	require.GreaterOrEqual(t, code, 0, "the proxy must handle SIGHUP, not be killed by it")
	t.Logf("exit status on SIGHUP while waiting for the IPAM: %d", code)
}
