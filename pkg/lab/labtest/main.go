package labtest

import (
	"os"
	"testing"

	"github.com/sirupsen/logrus"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
)

// SDKLogEnv names a file that receives the NSM SDK's logs of a test run
// (they are quiet otherwise).
const SDKLogEnv = "LAB_TEST_SDK_LOG"

// Main is the TestMain of a package whose tests run the NSM SDK: its logs
// quiet (or in the file SDKLogEnv names), and goleak over the whole run,
// leaving out the goroutines the SDK's dependencies leave by design
// (testutil.SDKLeaks).
func Main(m *testing.M) {
	controlplane.QuietSDKLogs()
	if p := os.Getenv(SDKLogEnv); p != "" {
		if f, err := os.Create(p); err == nil {
			logrus.SetOutput(f)
		}
	}
	goleak.VerifyTestMain(m, testutil.SDKLeaks()...)
}
