package labrun

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/pkg/lab/nsmcp"
)

func TestMain(m *testing.M) {
	nsmcp.QuietSDKLogs()
	// opencensus starts its worker at init (SDK dependency).
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"))
}
