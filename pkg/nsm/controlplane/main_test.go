package controlplane_test

import (
	"os"
	"testing"

	"github.com/sirupsen/logrus"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/internal/testutil"
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
	goleak.VerifyTestMain(m, testutil.SDKLeaks()...)
}
