package dataplane

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/testutil"
)

const bogusMAC = "02:00:00:00:00:99"

// poison makes ns hold addrs at bogusMAC on dev, as a neighbour does that
// knew them at another MAC (a target after the proxy's pod was replaced).
func poison(t *testing.T, ns *testutil.NetNS, dev string, addrs ...netip.Addr) {
	t.Helper()
	for _, a := range addrs {
		ns.MustExec(t, "ip", "neigh", "replace", a.String(), "lladdr", bogusMAC, "dev", dev, "nud", "stale")
	}
}

// neighborMACs reads ns's neighbour entries of addrs on dev (netlink, so
// that polling is cheap); a missing entry has an empty MAC.
func neighborMACs(t *testing.T, h *netlink.Handle, dev string, addrs ...netip.Addr) map[netip.Addr]string {
	t.Helper()
	l, err := h.LinkByName(dev)
	require.NoError(t, err)
	neighs, err := h.NeighList(l.Attrs().Index, netlink.FAMILY_ALL)
	require.NoError(t, err)
	out := map[netip.Addr]string{}
	for _, a := range addrs {
		out[a] = ""
	}
	for _, n := range neighs {
		if a, ok := netip.AddrFromSlice(n.IP); ok {
			if _, want := out[a.Unmap()]; want {
				out[a.Unmap()] = n.HardwareAddr.String()
			}
		}
	}
	return out
}

// waitCorrected waits until every entry of addrs on dev of ns holds mac and
// returns how long that took.
func waitCorrected(t *testing.T, h *netlink.Handle, dev string, mac net.HardwareAddr, addrs ...netip.Addr) time.Duration {
	t.Helper()
	start := time.Now()
	require.Eventually(t, func() bool {
		for _, got := range neighborMACs(t, h, dev, addrs...) {
			if got != mac.String() {
				return false
			}
		}
		return true
	}, time.Minute, time.Millisecond, "the neighbour's entries of %v must move to %s", addrs, mac)
	return time.Since(start)
}

// The Dataplane's announcements correct a neighbour's stale entries for the
// bridge's addresses when they are set, and again when they change.
func TestGratuitousAnnouncements(t *testing.T) {
	p := testutil.NewNetNS(t, "ga")
	n := testutil.NewNetNS(t, "nb")
	port := vethPair(t, p, "n0p", n, "n0")
	n.MustExec(t, "ip", "addr", "add", "192.0.2.50/24", "dev", "n0")
	n.MustExec(t, "ip", "addr", "add", "fd00:cafe::50/64", "dev", "n0", "nodad")
	hn := handle(t, n)
	first := []netip.Addr{ma("192.0.2.1"), ma("fd00:cafe::1")}
	poison(t, n, "n0", first...)
	dp := newDP(t, p, Options{AnnounceInterval: 100 * time.Millisecond})
	mac := dp.BridgeMAC()

	s := State{BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24"), mp("fd00:cafe::1/64")}, Ports: portsOf(port)}
	start := time.Now()
	require.NoError(t, dp.Apply(s))
	waitCorrected(t, hn, "n0", mac, first...)
	t.Logf("FIGURE: a neighbour's stale entries (IPv4 and IPv6) corrected %s after the Apply that set the bridge's addresses",
		time.Since(start).Round(time.Microsecond))

	// The next addresses, which the neighbour also holds at another MAC.
	next := []netip.Addr{ma("192.0.2.2"), ma("fd00:cafe::2")}
	poison(t, n, "n0", next...)
	s.BridgeAddrs = []netip.Prefix{mp("192.0.2.2/24"), mp("fd00:cafe::2/64")}
	require.NoError(t, dp.Apply(s))
	waitCorrected(t, hn, "n0", mac, next...)
	// Nothing is sent from a packet socket: without the notify sysctls the
	// entries stay as they are.
	p.MustExec(t, "sysctl", "-qw", "net.ipv4.conf."+DefaultBridgeName+".arp_notify=0",
		"net.ipv6.conf."+DefaultBridgeName+".ndisc_notify=0")
	poison(t, n, "n0", next...)
	before := dp.Stats().Announcements
	announced, _ := dp.announceRound()
	require.False(t, announced, "no round without a notify sysctl on")
	time.Sleep(100 * time.Millisecond)
	for a, got := range neighborMACs(t, hn, "n0", next...) {
		require.Equal(t, bogusMAC, got, "%s: nothing announced with the sysctls off", a)
	}
	require.Equal(t, before, dp.Stats().Announcements)
}

// A port that joins hears the bridge's addresses: its far end may hold them
// at the MAC of the proxy pod it was connected to before (Meridio #466).
func TestAnnouncementOnPortJoin(t *testing.T) {
	p := testutil.NewNetNS(t, "gj")
	n1 := testutil.NewNetNS(t, "gj1")
	n2 := testutil.NewNetNS(t, "gj2")
	port1 := vethPair(t, p, "t1p", n1, "eth0")
	port2 := vethPair(t, p, "t2p", n2, "eth0")
	n1.MustExec(t, "ip", "addr", "add", "192.0.2.51/24", "dev", "eth0")
	n2.MustExec(t, "ip", "addr", "add", "192.0.2.52/24", "dev", "eth0")
	n2.MustExec(t, "ip", "addr", "add", "fd00:cafe::52/64", "dev", "eth0", "nodad")
	bridge := []netip.Addr{ma("192.0.2.1"), ma("fd00:cafe::1")}
	dp := newDP(t, p, Options{AnnounceInterval: 100 * time.Millisecond})
	s := State{BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24"), mp("fd00:cafe::1/64")}, Ports: portsOf(port1)}
	require.NoError(t, dp.Apply(s))

	// Wait for the burst of the first Apply to end.
	require.Eventually(t, func() bool { return dp.Stats().Announcements >= 2*DefaultAnnounceCount }, time.Minute, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	poison(t, n2, "eth0", bridge...)
	s.Ports = append(s.Ports, Port{Index: port2})
	start := time.Now()
	require.NoError(t, dp.Apply(s))
	waitCorrected(t, handle(t, n2), "eth0", dp.BridgeMAC(), bridge...)
	t.Logf("FIGURE: the far end of a joining port corrected %s after the Apply", time.Since(start).Round(time.Microsecond))
}

// The kernel flushes the bridge's neighbour entries when its MAC is set:
// permanent ones are put back, dynamic ones are resolved again.
func TestAnnouncementKeepsPermanentNeighbors(t *testing.T) {
	ns := testutil.NewNetNS(t, "gp")
	lb := testutil.NewNetNS(t, "gplb")
	port := vethPair(t, ns, "lbp", lb, "eth0")
	lb.MustExec(t, "ip", "addr", "add", "192.0.2.11/24", "dev", "eth0")
	lb.MustExec(t, "ip", "addr", "add", "fd00:cafe::11/64", "dev", "eth0", "nodad")
	dp := newDP(t, ns, Options{AnnounceCount: -1})
	require.NoError(t, dp.Apply(State{BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24"), mp("fd00:cafe::1/64")}, Ports: portsOf(port)}))
	ns.MustExec(t, "ip", "neigh", "replace", "192.0.2.77", "lladdr", "02:00:00:00:00:77", "dev", DefaultBridgeName, "nud", "permanent")
	ns.MustExec(t, "ip", "neigh", "replace", "fd00:cafe::77", "lladdr", "02:00:00:00:00:77", "dev", DefaultBridgeName, "nud", "permanent")
	ns.MustExec(t, "ping", "-c", "1", "-W", "2", "192.0.2.11")
	ns.MustExec(t, "ping", "-6", "-c", "1", "-W", "2", "fd00:cafe::11")
	show := func() string { return ns.MustExec(t, "ip", "neigh", "show", "dev", DefaultBridgeName) }
	require.Contains(t, show(), "192.0.2.11 lladdr")

	before := dp.Stats()
	announced, _ := dp.announceRound()
	require.True(t, announced)
	after := dp.Stats()
	require.Equal(t, before.Writes, after.Writes, "an announcement is not a write of owned state")
	got := show()
	require.Contains(t, got, "192.0.2.77 lladdr 02:00:00:00:00:77 PERMANENT")
	require.Contains(t, got, "fd00:cafe::77 lladdr 02:00:00:00:00:77 PERMANENT")
	require.NotContains(t, got, "192.0.2.11 lladdr", "the kernel flushed the dynamic entries")
	require.EqualValues(t, 2, dp.Stats().NeighborsRestored)
	require.EqualValues(t, 2, dp.Stats().Announcements)
	// And the flushed ones come back with the next packet.
	ns.MustExec(t, "ping", "-c", "1", "-W", "2", "192.0.2.11")
}

// A host that takes over addresses announces them, and a neighbour's stale
// entries follow its MAC at once.
func TestAnnounceUpdatesNeighbours(t *testing.T) {
	host := testutil.NewNetNS(t, "annhost")
	peer := testutil.NewNetNS(t, "annpeer")
	host.MustExec(t, "ip", "link", "add", "h0", "type", "veth", "peer", "name", "p0", "netns", peer.Name)
	host.MustExec(t, "ip", "addr", "add", "10.9.0.2/24", "dev", "h0")
	host.MustExec(t, "ip", "addr", "add", "fd09::2/64", "dev", "h0", "nodad")
	host.MustExec(t, "ip", "link", "set", "h0", "up")
	peer.MustExec(t, "ip", "addr", "add", "10.9.0.1/24", "dev", "p0")
	peer.MustExec(t, "ip", "addr", "add", "fd09::1/64", "dev", "p0", "nodad")
	peer.MustExec(t, "ip", "link", "set", "p0", "up")
	addrs := []netip.Addr{ma("10.9.0.2"), ma("fd09::2")}
	poison(t, peer, "p0", addrs...)
	mac, err := net.ParseMAC(strings.TrimSpace(host.MustExec(t, "cat", "/sys/class/net/h0/address")))
	require.NoError(t, err)
	hp := handle(t, peer)

	// Announce in rounds, as callers do: a link that has just come up may
	// miss the first frames.
	require.Eventually(t, func() bool {
		require.NoError(t, Announce(host.Handle, "h0", addrs))
		for _, got := range neighborMACs(t, hp, "p0", addrs...) {
			if got != mac.String() {
				return false
			}
		}
		return true
	}, time.Minute, 100*time.Millisecond, "the peer's entries must move to %s", mac)
	require.Equal(t, "1", strings.TrimSpace(host.MustExec(t, "sysctl", "-n", "net.ipv4.conf.h0.arp_notify")))
	require.Equal(t, "1", strings.TrimSpace(host.MustExec(t, "sysctl", "-n", "net.ipv6.conf.h0.ndisc_notify")))

	require.Error(t, Announce(host.Handle, "nope0", addrs[:1]))
	err = Announce(host.Handle, "h0", []netip.Addr{ma("10.9.0.2"), ma("10.9.0.99")})
	require.ErrorContains(t, err, "10.9.0.99: not an address of h0")
	require.NotContains(t, err.Error(), "10.9.0.2:")
}
