package netnsdo_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/netnsdo"
	"github.com/causeway-net/causeway/internal/testutil"
)

// init keeps the main thread to TestMain's goroutine, so no test runs on
// it: the runtime cannot end the main thread, it only parks it, and the test
// of a failed switch back checks that the thread ends.
func init() { runtime.LockOSThread() }

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errCallback = errors.New("callback failed")

// inNS reports whether the calling thread is in ns.
func inNS(t *testing.T, ns netns.NsHandle) bool {
	t.Helper()
	cur, err := netns.Get()
	require.NoError(t, err)
	defer cur.Close()
	return cur.Equal(ns)
}

func TestDoRunsInTheNamespace(t *testing.T) {
	ns := testutil.NewNetNS(t, "nsdo")
	err := netnsdo.Do(ns.Handle, func() error {
		require.True(t, inNS(t, ns.Handle), "callback not in the namespace")
		return netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "cwdo0"}})
	})
	require.NoError(t, err)
	require.Contains(t, ns.MustExec(t, "ip", "link", "show"), "cwdo0")
	_, err = os.Stat("/sys/class/net/cwdo0")
	require.True(t, os.IsNotExist(err), "the link was made in the caller's namespace too")
}

func TestDoReturnsTheCallbackError(t *testing.T) {
	ns := testutil.NewNetNS(t, "nsdo")
	err := netnsdo.Do(ns.Handle, func() error { return errCallback })
	require.ErrorIs(t, err, errCallback)
	require.Equal(t, errCallback.Error(), err.Error(), "a successful switch back adds nothing")

	err = netnsdo.DoPath(ns.Path(), func() error { return errCallback })
	require.ErrorIs(t, err, errCallback)
}

func TestDoLeavesTheCallerInItsNamespace(t *testing.T) {
	ns := testutil.NewNetNS(t, "nsdo")
	// Lock the test's own thread so that "the caller's thread" is one
	// thread before and after; Do's lock nests inside it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	require.NoError(t, err)
	defer orig.Close()
	tid := unix.Gettid()

	for _, fn := range []func() error{
		func() error { return nil },
		func() error { return errCallback },
	} {
		_ = netnsdo.Do(ns.Handle, fn)
		require.Equal(t, tid, unix.Gettid(), "the caller's lock did not survive Do")
		require.True(t, inNS(t, orig), "the caller's thread did not come back")
	}
	require.False(t, inNS(t, ns.Handle))
}

func TestDoCurrentNamespaceRunsInPlace(t *testing.T) {
	testutil.RequireRoot(t)
	orig, err := netns.Get()
	require.NoError(t, err)
	defer orig.Close()
	for _, do := range []func(func() error) error{
		func(fn func() error) error { return netnsdo.Do(netns.None(), fn) },
		func(fn func() error) error { return netnsdo.Do(0, fn) },
		func(fn func() error) error { return netnsdo.DoPath("", fn) },
	} {
		called := false
		err := do(func() error {
			called = true
			return errCallback
		})
		require.True(t, called)
		require.ErrorIs(t, err, errCallback)
	}
}

func TestDoPathMissingNamespace(t *testing.T) {
	called := false
	err := netnsdo.DoPath(filepath.Join(t.TempDir(), "none"), func() error {
		called = true
		return nil
	})
	require.Error(t, err)
	require.False(t, called, "the callback ran without its namespace")
}

// TestDoFailedSwitchBackRetiresTheThread makes the switch back fail for
// real: the callback drops CAP_SYS_ADMIN from its own thread (capabilities
// are per thread), so setns back into the original namespace is refused.
// Do must then return both errors and keep the thread locked, so that it
// ends with its goroutine: afterwards no thread of the process is left in
// the namespace, and the thread itself is gone.
func TestDoFailedSwitchBackRetiresTheThread(t *testing.T) {
	ns := testutil.NewNetNS(t, "nsdo")
	type result struct {
		tid int
		err error
	}
	done := make(chan result, 1)
	go func() {
		var tid int
		err := netnsdo.Do(ns.Handle, func() error {
			tid = unix.Gettid()
			if err := dropSysAdmin(); err != nil {
				return err
			}
			return errCallback
		})
		done <- result{tid, err}
	}()
	r := <-done
	require.ErrorIs(t, r.err, errCallback)
	require.ErrorContains(t, r.err, "return to original netns")

	require.NotEqual(t, os.Getpid(), r.tid, "ran on the main thread, which cannot end")
	task := fmt.Sprintf("/proc/self/task/%d", r.tid)
	start := time.Now()
	require.Eventually(t, func() bool {
		_, err := os.Stat(task)
		return os.IsNotExist(err)
	}, time.Minute, 10*time.Millisecond, "thread %d is still alive: it went back to the pool", r.tid)
	t.Logf("FIGURE: thread retired %v after Do returned", time.Since(start))
	require.Empty(t, threadsIn(t, ns.Handle), "threads of the process left in the namespace")
}

// dropSysAdmin clears CAP_SYS_ADMIN from the calling thread's effective set.
func dropSysAdmin() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Effective &^= 1 << unix.CAP_SYS_ADMIN
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// threadsIn lists the process's threads whose network namespace is ns.
func threadsIn(t *testing.T, ns netns.NsHandle) []string {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	var in []string
	for _, task := range tasks {
		h, err := netns.GetFromPath(filepath.Join("/proc/self/task", task.Name(), "ns/net"))
		if err != nil {
			continue // the thread ended meanwhile
		}
		if h.Equal(ns) {
			in = append(in, task.Name())
		}
		_ = h.Close()
	}
	return in
}

func TestNetlinkHandleActsInTheNamespace(t *testing.T) {
	ns := testutil.NewNetNS(t, "nsdo")
	err := netnsdo.WithNetlink(ns.Path(), func(h *netlink.Handle) error {
		return h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "cwnl0"}})
	})
	require.NoError(t, err)
	require.Contains(t, ns.MustExec(t, "ip", "link", "show"), "cwnl0")
	_, err = os.Stat("/sys/class/net/cwnl0")
	require.True(t, os.IsNotExist(err), "the link was made in the caller's namespace too")

	_, err = netnsdo.NetlinkHandle(filepath.Join(t.TempDir(), "none"))
	require.Error(t, err)
}
