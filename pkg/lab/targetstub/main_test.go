package targetstub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/pkg/lab/nsmcp"
	"github.com/causeway-net/causeway/pkg/lab/targetstub"
)

// childEnv makes the test binary run one target stub as its own process
// (see TestTargetStubAsProcess) instead of the tests.
const childEnv = "TARGETSTUB_TEST_CHILD"

type childConfig struct {
	Config   targetstub.Config
	NSMgrURL string
}

func TestMain(m *testing.M) {
	nsmcp.QuietSDKLogs()
	if raw := os.Getenv(childEnv); raw != "" {
		os.Exit(runChild(raw))
	}
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"))
}

func runChild(raw string) int {
	var cc childConfig
	if err := json.Unmarshal([]byte(raw), &cc); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	u, err := url.Parse(cc.NSMgrURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cc.Config.NSMgrURL = u
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := targetstub.Run(ctx, cc.Config); err != nil {
		fmt.Fprintln(os.Stderr, "target stub:", err)
		return 1
	}
	return 0
}
