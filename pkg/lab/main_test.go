package lab_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/pkg/lab/nsmcp"
)

func TestMain(m *testing.M) {
	nsmcp.QuietSDKLogs()
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"))
}
