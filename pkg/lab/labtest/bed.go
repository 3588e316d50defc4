package labtest

import (
	"context"
	"testing"
	"time"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
)

// Deadline bounds a bed's context: far above what any stub test takes, it
// only guards against a test that hangs.
const Deadline = 2 * time.Minute

// AskTimeout bounds one question to an echo stub (traffic.Ask) in a test
// that repeats it until it is answered.
const AskTimeout = 2 * time.Second

// Bed is a running lab control plane with two fresh namespaces: the stub's
// and the one that plays the proxy.
type Bed struct {
	// Ctx ends after Deadline or at the end of the test.
	Ctx context.Context
	// Dir is the test's temporary directory; the control plane's sockets
	// are in it.
	Dir   string
	CP    *controlplane.ControlPlane
	Stub  *testutil.NetNS
	Proxy *testutil.NetNS
}

// NewBed makes the stub's namespace (its name starts with prefix) and the
// proxy's, and starts a control plane with cfg in a temporary directory
// (cfg.Dir is set to it). Everything is stopped and removed at the end of
// the test, even when it fails; a test may call b.CP.Stop earlier.
func NewBed(t *testing.T, prefix string, cfg controlplane.Config) *Bed {
	t.Helper()
	b := &Bed{Stub: testutil.NewNetNS(t, prefix), Proxy: testutil.NewNetNS(t, "prx"), Dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), Deadline)
	t.Cleanup(cancel)
	b.Ctx = ctx
	cfg.Dir = b.Dir
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start the control plane: %v", err)
	}
	t.Cleanup(cp.Stop)
	b.CP = cp
	return b
}
