package lbstub_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/causeway-net/causeway/pkg/lab/labtest"
	"github.com/causeway-net/causeway/pkg/lab/lbstub"
)

// childEnv makes the test binary run one LB stub as its own process (see
// TestLBStubAsProcess) instead of the tests.
const childEnv = "LBSTUB_TEST_CHILD"

func TestMain(m *testing.M) {
	labtest.RunChild(childEnv, "lb stub", func(ctx context.Context, cfg lbstub.Config, nsmgr *url.URL) error {
		cfg.NSMgrURL = nsmgr
		return lbstub.Run(ctx, cfg)
	})
	labtest.Main(m)
}
