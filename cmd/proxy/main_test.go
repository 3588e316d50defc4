package main

import (
	"io"
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
	"github.com/causeway-net/causeway/pkg/nsm/nsmlog"
)

// The tests of this package run the real proxy (and ipam) binaries in network
// namespaces, with the lab's NSM control plane, load balancer endpoints and
// target clients in the test process.
func TestMain(m *testing.M) {
	controlplane.QuietSDKLogs()
	// And its own logger: the in-process NSMgr, forwarder and clients log
	// every heal retry; the proxy's log (printed when a test fails) and the
	// assertions tell what went wrong.
	nsmlog.Install(slog.New(slog.NewTextHandler(io.Discard, nil)))
	goleak.VerifyTestMain(m, testutil.SDKLeaks()...)
}
