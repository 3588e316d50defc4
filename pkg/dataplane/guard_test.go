package dataplane

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/nftconn"
	"github.com/causeway-net/causeway/internal/testutil"
)

const (
	guardedPort = 9091
	openPort    = 9092
	podAddr4    = "10.99.0.1" // the proxy's namespace on its pod network, not a bridge port
	podPeer4    = "10.99.0.2"
)

// listenTCP listens on port in ns, on every address, until the test ends.
// Nothing accepts: the kernel completes a handshake without it.
func listenTCP(t *testing.T, ns *testutil.NetNS, port int) {
	t.Helper()
	var l net.Listener
	require.NoError(t, ns.Do(func() (err error) {
		l, err = net.Listen("tcp", ":"+strconv.Itoa(port))
		return err
	}))
	t.Cleanup(func() { _ = l.Close() })
}

// dialTCP connects from ns (from src when valid) to dst and returns the
// error, nil when the handshake completed.
func dialTCP(ns *testutil.NetNS, src netip.Addr, dst netip.AddrPort) error {
	d := net.Dialer{Timeout: 10 * time.Second}
	if src.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
	}
	return ns.Do(func() error {
		c, err := d.Dial("tcp", dst.String())
		if err == nil {
			_ = c.Close()
		}
		return err
	})
}

func guardTableExists(t *testing.T, ns *testutil.NetNS) bool {
	t.Helper()
	ok, err := nftconn.TableExists(ns.Handle, nftables.TableFamilyINet, GuardTable)
	require.NoError(t, err)
	return ok
}

func TestGuardedPortsRefusedFromTheBridgeOnly(t *testing.T) {
	tp := newTopology(t)
	pod := testutil.NewNetNS(t, "pod")
	vethPair(t, tp.P, "eth9", pod, "eth0")
	tp.P.MustExec(t, "ip", "addr", "add", podAddr4+"/24", "dev", "eth9")
	pod.MustExec(t, "ip", "addr", "add", podPeer4+"/24", "dev", "eth0")
	dp := newDP(t, tp.P, Options{GuardedPorts: []uint16{guardedPort, guardedPort}})
	require.NoError(t, dp.Apply(tp.state()))
	for _, ns := range []*testutil.NetNS{tp.P, tp.LB1, tp.LB2} {
		listenTCP(t, ns, guardedPort)
	}
	listenTCP(t, tp.P, openPort)
	require.True(t, guardTableExists(t, tp.P))

	for _, bridge := range []string{bridge4, bridge6} {
		guarded := netip.AddrPortFrom(ma(bridge), guardedPort)
		for name, ns := range map[string]*testutil.NetNS{"a target": tp.T1, "a load balancer": tp.LB1} {
			err := dialTCP(ns, netip.Addr{}, guarded)
			require.True(t, errors.Is(err, syscall.ECONNREFUSED), "%s reached %v over the bridge: %v", name, guarded, err)
			require.NoError(t, dialTCP(ns, netip.Addr{}, netip.AddrPortFrom(ma(bridge), openPort)), "%s: a port not guarded", name)
		}
	}
	// The namespace's other address is refused too when the packet comes
	// in over the bridge (a target that routes to it through the proxy).
	tp.T1.MustExec(t, "ip", "route", "add", podAddr4+"/32", "via", bridge4)
	err := dialTCP(tp.T1, netip.Addr{}, netip.AddrPortFrom(ma(podAddr4), guardedPort))
	require.True(t, errors.Is(err, syscall.ECONNREFUSED), "a target reached the pod address over the bridge: %v", err)

	// From the namespace itself and from its pod network, the port is open.
	require.NoError(t, dialTCP(tp.P, netip.Addr{}, netip.AddrPortFrom(ma("127.0.0.1"), guardedPort)))
	require.NoError(t, dialTCP(pod, netip.Addr{}, netip.AddrPortFrom(ma(podAddr4), guardedPort)))
	// Traffic the bridge routes is untouched: a VIP-sourced connection to
	// the outside on the guarded port reaches an LB (whose replies go
	// straight to the target, as an LB's do). One LB: here the LBs are the
	// servers, and a connection's segments must all reach the same one.
	one := tp.state()
	one.Nexthops = []netip.Addr{ma(lbAddr4[0]), ma(lbAddr6[0])}
	require.NoError(t, dp.Apply(one))
	tp.LB1.MustExec(t, "ip", "route", "add", vip4.String()+"/32", "via", targetAddr4[0])
	tp.LB1.MustExec(t, "ip", "-6", "route", "add", vip6.String()+"/128", "via", targetAddr6[0])
	for _, f := range []struct{ vip, ext netip.Addr }{{vip4, ext4}, {vip6, ext6}} {
		require.NoError(t, dialTCP(tp.T1, f.vip, netip.AddrPortFrom(f.ext, guardedPort)), "routed from %v", f.vip)
	}

	// A table someone deleted is set again by a Resync, as a restore.
	c, err := nftconn.Open(tp.P.Handle)
	require.NoError(t, err)
	c.DelTable(guardTable)
	require.NoError(t, c.Flush())
	require.NoError(t, dialTCP(tp.T1, netip.Addr{}, netip.AddrPortFrom(ma(bridge4), guardedPort)), "the guard deleted")
	before := dp.Stats()
	require.NoError(t, dp.Resync())
	after := dp.Stats()
	require.True(t, guardTableExists(t, tp.P), "Resync left the guard deleted")
	require.Equal(t, before.WritesByOp["nft guard set"]+1, after.WritesByOp["nft guard set"])
	require.Greater(t, after.Restores, before.Restores)
	err = dialTCP(tp.T1, netip.Addr{}, netip.AddrPortFrom(ma(bridge4), guardedPort))
	require.True(t, errors.Is(err, syscall.ECONNREFUSED), "a target reached the guarded port after the Resync: %v", err)

	// A restart without guarded ports removes the table; Teardown removes
	// a Dataplane's own.
	require.NoError(t, dp.Close())
	dp2 := newDP(t, tp.P, Options{})
	require.False(t, guardTableExists(t, tp.P), "a restart without guarded ports left the table")
	require.NoError(t, dialTCP(tp.T1, netip.Addr{}, netip.AddrPortFrom(ma(bridge4), guardedPort)))
	require.NoError(t, dp2.Close())
	dp3 := newDP(t, tp.P, Options{GuardedPorts: []uint16{guardedPort}})
	require.True(t, guardTableExists(t, tp.P))
	require.NoError(t, dp3.Teardown())
	require.False(t, guardTableExists(t, tp.P), "Teardown left the table")
	require.Equal(t, uint64(1), dp3.Stats().WritesByOp["nft guard del"])
}

func TestGuardedPortZeroRefused(t *testing.T) {
	ns := testutil.NewNetNS(t, "px")
	_, err := New(ctx, Options{NetNS: ns.Handle, Logger: testLogger(t), GuardedPorts: []uint16{0}})
	require.ErrorContains(t, err, "guarded port 0")
	require.False(t, guardTableExists(t, ns))
}
