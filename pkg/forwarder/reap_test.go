package forwarder

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/pkg/forwarder/reaper"
)

// openNetNS lists the descriptors of this process that hold namespace ino
// (by what they are, not by their paths: a namespace opened through its
// mount shows the mount's path).
func openNetNS(t *testing.T, ino uint64) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	var own unix.Stat_t
	require.NoError(t, unix.Stat("/proc/self/ns/net", &own))
	var out []string
	for _, fd := range fds {
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc/self/fd", fd.Name()), &st) == nil && st.Dev == own.Dev && st.Ino == ino {
			out = append(out, fd.Name())
		}
	}
	return out
}

// TestDeadPodTakesItsLinks: the forwarder's server chain (begin, the
// reaper, the stash) and client chain (the veth element, the reaper's) join
// a client's and an endpoint's namespaces. When one of them loses its pod
// (its mount goes and nothing runs in it), the veth end in the other stays
// only as long as the forwarder's own handle keeps the dead namespace; two
// sweeps of the reaper later the connection is closed through begin: the
// end in the live namespace is gone and no descriptor of the dead one is
// left open in the process. A Close that comes later (the connection's
// expiry) finds nothing left to do.
func TestDeadPodTakesItsLinks(t *testing.T) {
	for _, tc := range []struct {
		name       string
		clientDies bool
	}{{"client", true}, {"endpoint", false}} {
		t.Run(tc.name, func(t *testing.T) { deadPodTakesItsLinks(t, tc.clientDies) })
	}
}

func deadPodTakesItsLinks(t *testing.T, clientDies bool) {
	reap := reaper.New()
	m := establish(t, "r", reap)
	nsc, nse, ctx := m.nsc, m.nse, m.ctx
	require.NotZero(t, index(t, nsc, "nsm0"))
	require.NotZero(t, index(t, nse, m.nseName))
	reap.Sweep(ctx) // both seen alive

	dead, live, liveEnd := nsc, nse, m.nseName
	if !clientDies {
		dead, live, liveEnd = nse, nsc, "nsm0"
	}
	ino := reaper.Inode("file://" + dead.Path())
	require.NotZero(t, ino)
	dead.Remove(t)
	require.NotZero(t, index(t, live, liveEnd), "the forwarder's own handle keeps the dead namespace, and the pair")
	require.NotEmpty(t, openNetNS(t, ino))

	reap.Sweep(ctx)
	reap.Sweep(ctx)
	require.Zero(t, index(t, live, liveEnd), "the dead pod's link is gone from the live namespace")
	require.Empty(t, openNetNS(t, ino), "no descriptor of the dead namespace is open")

	_, err := m.fwd.Close(ctx, m.conn())
	require.NoError(t, err)
}
