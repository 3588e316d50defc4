package lbstub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/pkg/lab/lbstub"
	"github.com/causeway-net/causeway/pkg/lab/nsmcp"
)

// childEnv makes the test binary run one LB stub as its own process (see
// TestLBStubAsProcess) instead of the tests.
const childEnv = "LBSTUB_TEST_CHILD"

// childConfig is what the parent hands to the child.
type childConfig struct {
	Config   lbstub.Config
	NSMgrURL string
}

func TestMain(m *testing.M) {
	nsmcp.QuietSDKLogs()
	if p := os.Getenv("LAB_TEST_SDK_LOG"); p != "" && os.Getenv(childEnv) == "" {
		f, _ := os.Create(p)
		logrus.SetOutput(f)
	}
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
	u, err := parseUnixURL(cc.NSMgrURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cc.Config.NSMgrURL = u
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := lbstub.Run(ctx, cc.Config); err != nil {
		fmt.Fprintln(os.Stderr, "lb stub:", err)
		return 1
	}
	return 0
}
