package kernel

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netns"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A key that already holds the value is left alone, so a read-only key (as
// /proc/sys is in a pod) is no error; another value is written, and refused
// there.
func TestSetSysctlSkipsWhatHolds(t *testing.T) {
	testutil.RequireRoot(t)
	cur, err := os.ReadFile("/proc/sys/kernel/osrelease") // mode 0444: root cannot write it either
	require.NoError(t, err)
	require.NoError(t, SetSysctl(netns.None(), "kernel.osrelease", strings.TrimSpace(string(cur))))
	require.Error(t, SetSysctl(netns.None(), "kernel.osrelease", "causeway"))
}
