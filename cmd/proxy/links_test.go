package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
)

// TestProxyLinksNoPolicyEngine: the shipped proxy binary links neither the
// Open Policy Agent nor the SDK's authorize packages that bring it (about
// 9 MiB of resident memory; pkg/nsm/sdkreplacement/authorize decides instead).
func TestProxyLinksNoPolicyEngine(t *testing.T) {
	bin := testutil.BuildBinaries(t, "./cmd/proxy")["proxy"]
	out, err := exec.Command(testutil.GoTool(), "version", "-m", bin).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "github.com/networkservicemesh/sdk", "the module list is read")
	for _, line := range strings.Split(string(out), "\n") {
		require.NotContains(t, line, "open-policy-agent", "the proxy links OPA again: %s", line)
	}
	syms, err := exec.Command(testutil.GoTool(), "tool", "nm", bin).CombinedOutput()
	require.NoError(t, err)
	for _, pkg := range []string{"sdk/pkg/networkservice/common/authorize.", "sdk/pkg/registry/common/authorize.", "sdk/pkg/tools/opa."} {
		require.NotContains(t, string(syms), pkg, "the proxy links the SDK's %s", pkg)
	}
}
