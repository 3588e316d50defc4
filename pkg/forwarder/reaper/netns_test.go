package reaper

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
)

// TestLiveNetNS: a mounted namespace is alive, so is one that only a
// process keeps; one that only a file descriptor keeps is not.
func TestLiveNetNS(t *testing.T) {
	ns := testutil.NewNetNS(t, "live")
	ino := Inode("file://" + ns.Path())
	require.NotZero(t, ino)
	own, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	require.NotEqual(t, own, "net:["+itoa(ino)+"]")

	live, err := LiveNetNS()
	require.NoError(t, err)
	require.True(t, live[ino], "mounted")

	// A process in it, then the mount gone: the process keeps it.
	proc := exec.Command("ip", "netns", "exec", ns.Name, "sleep", "300")
	require.NoError(t, proc.Start())
	defer func() { _ = proc.Process.Kill(); _ = proc.Wait() }()
	require.Eventually(t, func() bool {
		link, err := os.Readlink(filepath.Join("/proc", itoa(uint64(proc.Process.Pid)), "ns", "net"))
		return err == nil && link == "net:["+itoa(ino)+"]"
	}, time.Minute, 20*time.Millisecond, "sleep entered the namespace")
	require.NoError(t, exec.Command("ip", "netns", "del", ns.Name).Run())
	live, err = LiveNetNS()
	require.NoError(t, err)
	require.True(t, live[ino], "a process lives in it")

	// The process gone: only the test's handle keeps it.
	require.NoError(t, proc.Process.Kill())
	_ = proc.Wait()
	live, err = LiveNetNS()
	require.NoError(t, err)
	require.False(t, live[ino], "kept by a file descriptor only")
	require.True(t, ns.Handle.IsOpen())
}

func TestInodeOfWhatIsNotANamespace(t *testing.T) {
	require.Zero(t, Inode("inode://4/4026531840"))
	require.Zero(t, Inode("file:///etc/hostname"))
	require.Zero(t, Inode("file:///nonexistent/netns"))
	require.Zero(t, Inode("%zz"))
	require.NotZero(t, Inode("file:///proc/self/ns/net"))
}

func itoa(u uint64) string { return strconv.FormatUint(u, 10) }
