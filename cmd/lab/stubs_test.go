package main

import (
	"log/slog"
	"strings"
	"testing"

	sdklog "github.com/networkservicemesh/sdk/pkg/tools/log"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
)

// TestStubLoggerKeepsTheSDKLevels: the SDK's debug lines are filtered out
// and its errors come out at ERROR, in the stub's JSON log.
func TestStubLoggerKeepsTheSDKLevels(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() {
		slog.SetDefault(prev)
		sdklog.SetGlobalLogger(sdklog.Default())
	})
	var log testutil.JSONLog
	installStubLogger(&log, "nsm")

	sdklog.L().Debugf("passed clientURL: %v", "unix:///x")
	sdklog.L().Errorf("select forwarder: %v", "all forwarders have failed")
	slog.Info("nsm control plane up")

	lines := log.Lines()
	require.Len(t, lines, 2, log.String())
	assert.Equal(t, "ERROR", lines[0]["level"])
	assert.Equal(t, "select forwarder: all forwarders have failed", lines[0]["msg"])
	assert.Equal(t, "nsm", lines[0]["component"])
	assert.Equal(t, "INFO", lines[1]["level"])
	assert.Equal(t, "nsm control plane up", lines[1]["msg"])
}

// TestStubsOnTheAPINeedTheirNamespace: a stub told to publish on its pod
// or to read the targets' pods, outside a pod (no POD_NAMESPACE), refuses
// to start with status 2 and says what is missing.
func TestStubsOnTheAPINeedTheirNamespace(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	for cmd, flag := range map[string][]string{"lb": {"-targets-from-pods", "app=targets"}, "target": {"-publish-on-pod"}} {
		code, _, errOut := runCommand(t, cmd, append([]string{"-nsmgr", "unix:///nowhere.sock", "-name", "x"}, flag...)...)
		if code != 2 || !strings.Contains(errOut, "lab "+cmd+": the targets' board on the API server: POD_NAMESPACE is not set") {
			t.Errorf("lab %s %v: status %d, %q", cmd, flag, code, errOut)
		}
	}
}
