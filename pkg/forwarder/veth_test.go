package forwarder

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func index(t *testing.T, ns *testutil.NetNS, name string) int {
	t.Helper()
	h, err := netlink.NewHandleAt(ns.Handle)
	require.NoError(t, err)
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return 0
	}
	return l.Attrs().Index
}

// TestVethPairLifecycle drives the veth element's kernel side directly:
// create with MTU, idempotent ensure, replacement when the NSE side moves,
// removal.
func TestVethPairLifecycle(t *testing.T) {
	nsc := testutil.NewNetNS(t, "vc")
	nseA := testutil.NewNetNS(t, "va")
	nseB := testutil.NewNetNS(t, "vb")
	v := newVethClient()
	defer v.remove("conn-1")

	c := end{netnsURL: "file://" + nsc.Path(), name: "nsm0"}
	a := end{netnsURL: "file://" + nseA.Path(), name: "svc-a"}
	require.NoError(t, v.ensure("conn-1", c, a, 1400))
	first := index(t, nsc, "nsm0")
	require.NotZero(t, first)
	require.NotZero(t, index(t, nseA, "svc-a"))
	h, err := netlink.NewHandleAt(nseA.Handle)
	require.NoError(t, err)
	l, err := h.LinkByName("svc-a")
	h.Close()
	require.NoError(t, err)
	require.Equal(t, 1400, l.Attrs().MTU)
	require.Equal(t, uint8(netlink.OperUp), uint8(l.Attrs().OperState))

	// Refresh: nothing recreated.
	require.NoError(t, v.ensure("conn-1", c, a, 1400))
	require.Equal(t, first, index(t, nsc, "nsm0"))

	// Heal toward another NSE: the pair moves.
	b := end{netnsURL: "file://" + nseB.Path(), name: "svc-b"}
	require.NoError(t, v.ensure("conn-1", c, b, 0))
	require.NotZero(t, index(t, nseB, "svc-b"))
	require.Zero(t, index(t, nseA, "svc-a"))

	// Somebody deleted our end: the next refresh restores the pair.
	nsc.MustExec(t, "ip", "link", "del", "nsm0")
	require.NoError(t, v.ensure("conn-1", c, b, 0))
	require.NotZero(t, index(t, nsc, "nsm0"))

	v.remove("conn-1")
	require.Zero(t, index(t, nsc, "nsm0"))
	require.Zero(t, index(t, nseB, "svc-b"))

	require.Error(t, v.ensure("conn-2", c, end{netnsURL: "inode://4/1", name: "x"}, 0), "only file:// namespaces")
}

// TestRestartedForwarderAdoptsItsPairs: a forwarder started again (the NSM
// control plane restarted) is asked for a connection whose pair an earlier
// run made: it takes the pair over as it is, so the data path is not cut.
// A pair whose ends are not each other's peers is replaced.
func TestRestartedForwarderAdoptsItsPairs(t *testing.T) {
	nsc := testutil.NewNetNS(t, "vc")
	nse := testutil.NewNetNS(t, "va")
	c := end{netnsURL: "file://" + nsc.Path(), name: "nsm0"}
	e := end{netnsURL: "file://" + nse.Path(), name: "svc-a"}

	before := newVethClient()
	require.NoError(t, before.ensure("conn-1", c, e, 1400))
	made := index(t, nsc, "nsm0")

	after := newVethClient() // the earlier run's state is gone
	defer after.remove("conn-1")
	require.NoError(t, after.ensure("conn-1", c, e, 1400))
	require.Equal(t, made, index(t, nsc, "nsm0"), "adopted, not recreated")
	for _, p := range before.pairs.byConn {
		p.close() // the dead run's namespace handles
	}

	// Ends that are not peers: a stray veth under our name is replaced.
	after.remove("conn-1")
	nsc.MustExec(t, "ip", "link", "add", "nsm0", "type", "veth", "peer", "name", "stray0")
	nse.MustExec(t, "ip", "link", "add", "svc-a", "type", "veth", "peer", "name", "stray1")
	nsc.MustExec(t, "ip", "link", "set", "nsm0", "up")
	nse.MustExec(t, "ip", "link", "set", "svc-a", "up")
	stray := index(t, nsc, "nsm0")
	require.NoError(t, after.ensure("conn-1", c, e, 1400))
	require.NotEqual(t, stray, index(t, nsc, "nsm0"), "replaced")
}
