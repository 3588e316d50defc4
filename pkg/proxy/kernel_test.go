package proxy

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
)

// TestKernelProxyWithRealDataplane wires the proxy to the real dataplane in
// a throw-away namespace and the real IPAM engine: the bridge gets the IPAM's
// address, an LB interface becomes a port and the ECMP nexthop, a VIP gets
// its rule (its removal flushes its conntrack entries), and a delete known
// only by index removes port and route.
func TestKernelProxyWithRealDataplane(t *testing.T) {
	ns := testutil.NewNetNS(t, "proxy")
	dp, err := dataplane.New(context.Background(), dataplane.Options{NetNS: ns.Handle, Logger: testLogger()})
	require.NoError(t, err)
	defer func() { require.NoError(t, dp.Close()) }()

	engine := realEngine(t, memory.New())
	p, err := New(context.Background(), Config{
		Conduit: "conduit-a", Trench: "trench-a", Node: "worker-1",
		IPAM: serveIPAM(t, ipam.NewServer(engine)), Dataplane: dp,
		RetryInterval: time.Millisecond, Logger: testLogger(),
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close(context.Background())) }()

	eventually := func(what string, cmd []string, ok func(string) bool) {
		t.Helper()
		var out string
		require.Eventually(t, func() bool {
			out, _ = ns.Exec(cmd...)
			return ok(out)
		}, waitFor, 20*time.Millisecond, "%s; last output:\n%s", what, out)
	}
	eventually("bridge addresses", []string{"ip", "addr", "show", "bridge0"}, func(s string) bool {
		return strings.Contains(s, "172.16.0.1/24") && strings.Contains(s, "fd00::1/64")
	})

	// An LB connection: its addresses, then its interface.
	conn := lbConn("proxy-lb-1")
	require.NoError(t, p.SetIPContext(context.Background(), conn, LBConn))
	lbAddr := netip.MustParsePrefix(ipcOf(conn).GetDstIpAddrs()[0]).Addr()
	ns.MustExec(t, "ip", "link", "add", "nsm-lb0", "type", "veth", "peer", "name", "lb-peer0")
	ns.MustExec(t, "ip", "link", "set", "nsm-lb0", "up")
	ns.MustExec(t, "ip", "link", "set", "lb-peer0", "up")
	idx := ns.LinkIndex(t, "nsm-lb0")
	p.InterfaceCreated(Interface{Index: idx, Name: "nsm-lb0", Type: LBConn, ConnKey: conn.GetId()})
	eventually("port", []string{"ip", "link", "show", "nsm-lb0"}, func(s string) bool {
		return strings.Contains(s, "master bridge0")
	})
	eventually("ECMP route", []string{"ip", "route", "show", "table", "1"}, func(s string) bool {
		return strings.Contains(s, "default via "+lbAddr.String())
	})

	require.NoError(t, p.SetVIPs([]netip.Prefix{netip.MustParsePrefix("20.0.0.1/32")}))
	eventually("VIP rule", []string{"ip", "rule", "show"}, func(s string) bool {
		return strings.Contains(s, "from 20.0.0.1 lookup 1")
	})

	// Removing the VIP removes its rule, and the dataplane (the one owner
	// of the flush) drops its conntrack entries; others stay.
	ns.MustExec(t, "conntrack", "-I", "-p", "udp", "-s", "20.0.0.1", "-d", "198.51.100.1", "--sport", "1000", "--dport", "53", "-t", "300")
	ns.MustExec(t, "conntrack", "-I", "-p", "udp", "-s", "20.0.0.2", "-d", "198.51.100.1", "--sport", "1000", "--dport", "53", "-t", "300")
	require.NoError(t, p.SetVIPs(nil))
	eventually("VIP rule and conntrack entries removed", []string{"sh", "-c", "ip rule show; conntrack -L -f ipv4"}, func(s string) bool {
		return !strings.Contains(s, "20.0.0.1") && strings.Contains(s, "src=20.0.0.2")
	})

	// The link goes; the kernel event knows only its index.
	ns.MustExec(t, "ip", "link", "del", "nsm-lb0")
	p.InterfaceDeleted(Interface{Index: idx})
	eventually("route removed", []string{"ip", "route", "show", "table", "1"}, func(s string) bool {
		return !strings.Contains(s, lbAddr.String())
	})
	require.Equal(t, 0, p.Stats().Nexthops)
}

// TestKernelHealRemovesReplacedLink: an LB connection healed onto a new
// link (its old forwarder gone, the old link still there with the proxy's
// address) loses the old link, so that the address is on one link only,
// and the new link is its port.
func TestKernelHealRemovesReplacedLink(t *testing.T) {
	ns := testutil.NewNetNS(t, "proxy")
	p := kernelProxy(t, ns)

	conn := lbConn("proxy-lb-1")
	require.NoError(t, p.SetIPContext(context.Background(), conn, LBConn))
	own := ipcOf(conn).GetSrcIpAddrs()[0]
	lbAddr := netip.MustParsePrefix(ipcOf(conn).GetDstIpAddrs()[0]).Addr()
	announce := func(name string) {
		ns.MustExec(t, "ip", "link", "add", name, "type", "veth", "peer", "name", name+"-p")
		ns.MustExec(t, "ip", "addr", "add", own, "dev", name)
		ns.MustExec(t, "ip", "link", "set", name, "up")
		p.InterfaceCreated(Interface{Index: ns.LinkIndex(t, name), Name: name, Type: LBConn, ConnKey: conn.GetId()})
	}
	announce("nsm-lb0")
	announce("nsm-lb1")
	require.Eventually(t, func() bool {
		out, _ := ns.Exec("ip", "-o", "addr")
		return strings.Count(out, " "+own+" ") == 1 && strings.Contains(out, "nsm-lb1    inet "+own)
	}, waitFor, 20*time.Millisecond, "the proxy's address is on the new link only")
	_, err := ns.Exec("ip", "link", "show", "nsm-lb0-p")
	require.Error(t, err, "the old pair is gone, both ends")
	require.Eventually(t, func() bool {
		route, _ := ns.Exec("ip", "route", "show", "table", "1")
		port, _ := ns.Exec("ip", "link", "show", "nsm-lb1")
		return strings.Contains(route, "default via "+lbAddr.String()) && strings.Contains(port, "master bridge0")
	}, waitFor, 20*time.Millisecond, "the new link is the port of the LB's nexthop")
	require.Equal(t, 1, p.Stats().Ports)
}
