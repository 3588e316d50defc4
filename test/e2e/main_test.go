package e2e_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
)

// binDir holds the binaries built once for the whole suite; empty when the
// suite does not run (not root, -short).
var binDir string

// commands are the binaries a lab runs.
var commands = []string{"./cmd/proxy", "./cmd/ipam", "./cmd/nsp", "./cmd/lab"}

func TestMain(m *testing.M) {
	flag.Parse()
	controlplane.QuietSDKLogs()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if !testing.Short() && os.Geteuid() == 0 {
		dir, err := os.MkdirTemp("", "causeway-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		if err := build(dir); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		binDir = dir
	}
	code := m.Run()
	// The lab's NSM control plane runs in this process: nothing of it may
	// outlive the labs. OpenCensus starts its view worker on import and
	// never stops it.
	if err := goleak.Find(goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start")); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "e2e: leaked goroutines:", err)
		code = 1
	}
	return code
}

// build compiles the lab's commands into dir.
func build(dir string) error {
	for _, c := range commands {
		if _, err := testutil.BuildBinary(dir, c); err != nil {
			return err
		}
	}
	return nil
}
