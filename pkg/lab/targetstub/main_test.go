package targetstub_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/causeway-net/causeway/pkg/lab/labtest"
	"github.com/causeway-net/causeway/pkg/lab/targetstub"
)

// childEnv makes the test binary run one target stub as its own process
// (see TestTargetStubAsProcess) instead of the tests.
const childEnv = "TARGETSTUB_TEST_CHILD"

func TestMain(m *testing.M) {
	labtest.RunChild(childEnv, "target stub", func(ctx context.Context, cfg targetstub.Config, nsmgr *url.URL) error {
		cfg.NSMgrURL = nsmgr
		return targetstub.Run(ctx, cfg)
	})
	labtest.Main(m)
}
