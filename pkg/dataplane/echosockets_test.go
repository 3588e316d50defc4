package dataplane

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
)

// EchoSockets: New opens ICMP echo sockets to every group of the namespace
// (the datapath check's probes), Snapshot reports it by fields, and the
// kernel's tab-separated value counts as set: a second New writes nothing,
// so a read-only /proc/sys that holds it is fine.
func TestEchoSockets(t *testing.T) {
	ns := testutil.NewNetNS(t, "echo")
	dp := newDP(t, ns, Options{EchoSockets: true})
	require.Equal(t, "0\t2147483647", strings.TrimSpace(ns.MustExec(t, "sysctl", "-n", "net.ipv4.ping_group_range")))
	snap, err := dp.Snapshot()
	require.NoError(t, err)
	require.Equal(t, "0 2147483647", snap.Sysctls["net.ipv4.ping_group_range"])
	written, err := setSysctls(ns.Handle, "", echoSocketSysctls())
	require.NoError(t, err)
	require.Zero(t, written, "the value already set is not written again")
	require.NotContains(t, strings.Join(PodSysctls(0), " "), "ping_group_range", "the chart sets it on a line of its own")
}
