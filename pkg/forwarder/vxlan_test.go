package forwarder

import (
	"net"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/testutil"
)

// vxlanIn returns the VXLAN device called name in ns, nil when there is none.
func vxlanIn(t *testing.T, ns *testutil.NetNS, name string) *netlink.Vxlan {
	t.Helper()
	for _, l := range ns.Links(t) {
		if l.Attrs().Name == name {
			dev, ok := l.(*netlink.Vxlan)
			require.True(t, ok, "%s is a %s", name, l.Type())
			return dev
		}
	}
	return nil
}

// nodeNetNS is a node's namespace on a node network: 192.0.2.1/24 on ln0,
// one end of a veth, up. The tunnel's parameters toward 192.0.2.2 (VNI
// 42) go with it.
func nodeNetNS(t *testing.T) (*testutil.NetNS, tunnelParams) {
	t.Helper()
	node := testutil.NewNetNS(t, "xn")
	node.MustExec(t, "ip", "link", "add", "ln0", "type", "veth", "peer", "name", "ln1")
	node.MustExec(t, "ip", "addr", "add", "192.0.2.1/24", "dev", "ln0")
	node.MustExec(t, "ip", "link", "set", "ln0", "up")
	return node, tunnelParams{local: net.ParseIP("192.0.2.1"), remote: net.ParseIP("192.0.2.2"), vni: 42, port: 4789, peerPort: 4789}
}

// TestVXLANDeviceLifecycle drives the VXLAN element's kernel side directly:
// the device is made from the node's namespace into the client's with the
// tunnel's parameters and MTU; a refresh keeps it; a restarted forwarder
// adopts it; other parameters replace it; Close removes it; bad parameters
// are refused and change nothing.
func TestVXLANDeviceLifecycle(t *testing.T) {
	node, p := nodeNetNS(t)
	nsc := testutil.NewNetNS(t, "xc")

	v := newVXLANClient(node.Path())
	defer v.remove("conn-1")
	where := end{netnsURL: "file://" + nsc.Path(), name: "nsm0"}
	require.NoError(t, v.ensure("conn-1", where, p, 1400))
	dev := vxlanIn(t, nsc, "nsm0")
	require.NotNil(t, dev)
	require.Equal(t, 42, dev.VxlanId)
	require.Equal(t, "192.0.2.2", dev.Group.String())
	require.Equal(t, "192.0.2.1", dev.SrcAddr.String())
	require.Equal(t, 1400, dev.MTU)
	require.Nil(t, vxlanIn(t, node, "nsm0"), "nothing in the node's namespace")
	first := dev.Index

	require.NoError(t, v.ensure("conn-1", where, p, 1400))
	require.Equal(t, first, nsc.LinkIndex(t, "nsm0"), "refresh keeps the device")

	restarted := newVXLANClient(node.Path())
	require.NoError(t, restarted.ensure("conn-1", where, p, 1400))
	require.Equal(t, first, nsc.LinkIndex(t, "nsm0"), "a restarted forwarder adopts the device")
	restarted.tunnels.byConn["conn-1"].close() // one owner left: v

	other := p
	other.vni = 44
	require.NoError(t, v.ensure("conn-1", where, other, 1400))
	require.Equal(t, 44, vxlanIn(t, nsc, "nsm0").VxlanId, "a new VNI replaces the device")
	require.Equal(t, tagPrefix+"conn-1", vxlanIn(t, nsc, "nsm0").Alias)

	// A forwarder started again after a lost Close, asked for the
	// connection under another interface name (a reselect names the
	// endpoint's interface anew): the earlier run's device goes.
	again := newVXLANClient(node.Path())
	require.NoError(t, again.ensure("conn-1", end{netnsURL: where.netnsURL, name: "nsm9"}, p, 1400))
	require.Nil(t, vxlanIn(t, nsc, "nsm0"), "the earlier run's device of the connection")
	require.NotNil(t, vxlanIn(t, nsc, "nsm9"))
	again.remove("conn-1")
	require.NoError(t, v.ensure("conn-1", where, other, 1400))

	v.remove("conn-1")
	require.Nil(t, vxlanIn(t, nsc, "nsm0"))

	// No MTU from the connection: the node network's, less the overhead.
	require.NoError(t, v.ensure("conn-3", end{netnsURL: where.netnsURL, name: "nsm3"}, p, 0))
	require.Equal(t, 1500-50, vxlanIn(t, nsc, "nsm3").MTU)
	v.remove("conn-3")
	node.MustExec(t, "ip", "addr", "add", "2001:db8::1/64", "dev", "ln0", "nodad")
	p6 := tunnelParams{local: net.ParseIP("2001:db8::1"), remote: net.ParseIP("2001:db8::2"), vni: 46, port: 4789}
	require.NoError(t, v.ensure("conn-3", end{netnsURL: where.netnsURL, name: "nsm3"}, p6, 0))
	require.Equal(t, 1500-70, vxlanIn(t, nsc, "nsm3").MTU)
	v.remove("conn-3")

	bad := p
	bad.peerPort = 8472
	require.ErrorContains(t, v.ensure("conn-2", where, bad, 0), "ports differ")
	bad = p
	bad.remote = net.ParseIP("2001:db8::2")
	require.ErrorContains(t, v.ensure("conn-2", where, bad, 0), "two families")
	bad = p
	bad.vni = 0
	require.ErrorContains(t, v.ensure("conn-2", where, bad, 0), "VNI")
	require.Nil(t, vxlanIn(t, nsc, "nsm0"))
	require.Empty(t, v.tunnels.byConn)
}

// TestVXLANEarlierRunOfAnotherName is a forwarder replaced by one of another
// name (a new pod on the node's network): the connection comes back on a
// path segment of its own, under another id and interface name, while the
// old run's devices stay (their sockets live in the node's namespace). The
// new run removes the old run's device of the connection, found by the VNI
// it holds (the kernel refuses a second device of one VNI and port from one
// namespace) or by the connection's addresses toward the same peer, and
// leaves alone the devices of its own connections and those of another
// node's address.
func TestVXLANEarlierRunOfAnotherName(t *testing.T) {
	node, p := nodeNetNS(t)
	nse := testutil.NewNetNS(t, "xe")
	url := "file://" + nse.Path()
	addr := net.ParseIP("10.80.0.1")

	old := newVXLANClient(node.Path())
	require.NoError(t, old.ensure("old-conn", end{netnsURL: url, name: "nsm-old"}, p, 1400))
	nse.MustExec(t, "ip", "addr", "add", "10.80.0.1/24", "dev", "nsm-old")
	oldMAC := vxlanIn(t, nse, "nsm-old").HardwareAddr
	old.tunnels.byConn["old-conn"].close() // the old run is gone, its device stays

	// Same VNI, another id and name: the kernel would refuse the new device.
	// The new one keeps the old one's MAC address, which the connection's
	// peers have in their neighbour entries.
	fresh := newVXLANClient(node.Path())
	defer fresh.remove("new-conn")
	require.NoError(t, fresh.ensure("new-conn", end{netnsURL: url, name: "nsm-new", ips: []net.IP{addr}}, p, 1400))
	require.Nil(t, vxlanIn(t, nse, "nsm-old"), "the old run's device of the VNI")
	require.Equal(t, 42, vxlanIn(t, nse, "nsm-new").VxlanId)
	require.Equal(t, oldMAC.String(), vxlanIn(t, nse, "nsm-new").HardwareAddr.String(), "the replaced device's MAC kept")
	fresh.remove("new-conn")

	// Another VNI (the serving node chose anew), the connection's address
	// toward the same peer: the old device would take its traffic.
	require.NoError(t, old.ensure("old-conn", end{netnsURL: url, name: "nsm-old"}, p, 1400))
	nse.MustExec(t, "ip", "addr", "add", "10.80.0.1/24", "dev", "nsm-old")
	old.tunnels.byConn["old-conn"].close()
	old = newVXLANClient(node.Path())
	other := p
	other.vni = 44
	require.NoError(t, fresh.ensure("new-conn", end{netnsURL: url, name: "nsm-new", ips: []net.IP{addr}}, other, 1400))
	require.Nil(t, vxlanIn(t, nse, "nsm-old"), "the old run's device with the connection's address")

	// Left alone: this run's own other connection toward the same peer, and
	// an earlier device of another node's address with the same VNI.
	defer fresh.remove("mine")
	require.NoError(t, fresh.ensure("mine", end{netnsURL: url, name: "nsm-mine", ips: []net.IP{net.ParseIP("10.81.0.1")}}, p, 1400))
	nse.MustExec(t, "ip", "addr", "add", "10.80.0.9/24", "dev", "nsm-mine")
	node.MustExec(t, "ip", "addr", "add", "192.0.2.3/24", "dev", "ln0")
	elsewhere := p
	elsewhere.local = net.ParseIP("192.0.2.3")
	elsewhere.vni = 46
	require.NoError(t, old.ensure("old-elsewhere", end{netnsURL: url, name: "nsm-else"}, elsewhere, 1400))
	old.tunnels.byConn["old-elsewhere"].close()
	defer deleteVXLAN(nse.Handle, "nsm-else")
	require.NoError(t, fresh.ensure("new-2", end{netnsURL: url, name: "nsm-new2", ips: []net.IP{net.ParseIP("10.80.0.9")}}, tunnelParams{
		local: p.local, remote: p.remote, vni: 48, port: 4789,
	}, 1400))
	defer fresh.remove("new-2")
	require.NotNil(t, vxlanIn(t, nse, "nsm-mine"), "a device this run holds")
	require.NotNil(t, vxlanIn(t, nse, "nsm-else"), "a device of another local address")
	require.NotNil(t, vxlanIn(t, nse, "nsm-new2"))

	// A VNI this run holds for another connection stays refused.
	err := fresh.ensure("new-3", end{netnsURL: url, name: "nsm-new3"}, p, 1400)
	require.ErrorContains(t, err, "add vxlan")
	require.NotNil(t, vxlanIn(t, nse, "nsm-mine"))
}

// TestVXLANSupersededConnection is a peer node cut off and booted again:
// its client asks anew, under another connection id and VNI, for the
// addresses an earlier connection of this run still holds toward it (that
// connection's Close never came). The earlier connection's device goes, so
// that the addresses are on the new device alone; a connection of other
// addresses toward the same peer stays.
func TestVXLANSupersededConnection(t *testing.T) {
	node, p := nodeNetNS(t)
	nse := testutil.NewNetNS(t, "xs")
	url := "file://" + nse.Path()
	addr := net.ParseIP("10.80.0.1")

	v := newVXLANClient(node.Path())
	defer v.remove("new")
	defer v.remove("other")
	require.NoError(t, v.ensure("old", end{netnsURL: url, name: "nsm-old", ips: []net.IP{addr}}, p, 1400))
	other := p
	other.vni = 43
	require.NoError(t, v.ensure("other", end{netnsURL: url, name: "nsm-other", ips: []net.IP{net.ParseIP("10.80.0.9")}}, other, 1400))

	again := p
	again.vni = 44
	require.NoError(t, v.ensure("new", end{netnsURL: url, name: "nsm-new", ips: []net.IP{addr}}, again, 1400))
	require.Nil(t, vxlanIn(t, nse, "nsm-old"), "the superseded connection's device")
	require.NotContains(t, v.tunnels.byConn, "old")
	require.Equal(t, 44, vxlanIn(t, nse, "nsm-new").VxlanId)
	require.NotNil(t, vxlanIn(t, nse, "nsm-other"), "a connection of other addresses")
	v.remove("old") // its Close, late: nothing left to do
	require.NotNil(t, vxlanIn(t, nse, "nsm-new"))
}

// TestVXLANKeptWhenTheConnectionMoves: a Close made within a Request of
// the connection (the dial client moving it to a new URL of the peer's
// NSMgr, move.go) keeps the device, which goes with a Close from outside a
// Request.
func TestVXLANKeptWhenTheConnectionMoves(t *testing.T) {
	node, p := nodeNetNS(t)
	nsc := testutil.NewNetNS(t, "xm")
	v := newVXLANClient(node.Path())
	defer v.remove("conn-1")
	require.NoError(t, v.ensure("conn-1", end{netnsURL: "file://" + nsc.Path(), name: "nsm0"}, p, 1400))
	conn := &networkservice.Connection{Id: "conn-1"}

	_, err := v.Close(withinRequest(t.Context()), conn)
	require.NoError(t, err)
	require.NotNil(t, vxlanIn(t, nsc, "nsm0"), "kept through the move's Close")

	_, err = v.Close(t.Context(), conn)
	require.NoError(t, err)
	require.Nil(t, vxlanIn(t, nsc, "nsm0"), "a Close from outside a Request removes it")
}
