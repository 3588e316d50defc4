package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
)

// TestProxyLinksNoPolicyOrTemplateEngine: the shipped proxy binary links
// neither the Open Policy Agent nor the SDK's authorize packages that bring
// it (about 9 MiB of resident memory; pkg/nsm/sdkreplacement/authorize
// decides instead), nor golang.org/x/net/trace and text/template's
// executor. A program that may run a template may call any method by its
// name, so the linker keeps every exported method of every type that is
// ever an interface value (the Kubernetes API types' among them); gRPC
// links x/net/trace, and its HTML templates, unless built with the tag
// grpcnotrace (testutil.BuildTags, the Makefile, the Dockerfile).
func TestProxyLinksNoPolicyOrTemplateEngine(t *testing.T) {
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
	for _, sym := range []string{"golang.org/x/net/trace.", "text/template.(*state).evalCall"} {
		require.NotContains(t, string(syms), sym, "the proxy links %s: every exported method is kept again", sym)
	}
}
