// Package testutil holds helpers shared by Causeway's tests: the root policy
// of the kernel test tier, throw-away network namespaces, building the
// binaries that tests run, and an in-process SPIFFE CA with a fake Workload
// API for the mTLS paths.
package testutil

import (
	"os"
	"testing"
)

// RequireRoot skips t when the process is not root, unless
// CAUSEWAY_REQUIRE_ROOT is set, in which case it fails t: CI sets it so that a
// kernel test can never pass by being skipped.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CAUSEWAY_REQUIRE_ROOT") != "" {
		t.Fatal("this test needs root and CAUSEWAY_REQUIRE_ROOT is set")
	}
	t.Skip("needs root (set CAUSEWAY_REQUIRE_ROOT=1 to make this a failure)")
}
