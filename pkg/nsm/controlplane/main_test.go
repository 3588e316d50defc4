package controlplane_test

import (
	"os"
	"testing"

	"github.com/sirupsen/logrus"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
)

func TestMain(m *testing.M) {
	if path := os.Getenv("LAB_TEST_SDK_LOG"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			panic(err)
		}
		logrus.SetOutput(f)
		logrus.SetLevel(logrus.InfoLevel)
	} else {
		controlplane.QuietSDKLogs()
	}
	goleak.VerifyTestMain(m,
		// grpc and the SDK keep package-level workers that outlive tests.
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}
