package dataplane

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/testutil"
)

func TestGARPFrame(t *testing.T) {
	mac := net.HardwareAddr{0x02, 1, 2, 3, 4, 5}
	f := garpFrame(mac, ma("192.0.2.1"))
	require.Len(t, f, 60)
	require.Equal(t, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, f[0:6])
	require.Equal(t, []byte(mac), f[6:12])
	require.Equal(t, uint16(ethPARP), binary.BigEndian.Uint16(f[12:14]))
	an, ok := parseAnnouncement(f)
	require.True(t, ok)
	require.Equal(t, ma("192.0.2.1"), an.addr)
	require.Equal(t, mac.String(), an.mac.String())
}

func TestNAFrame(t *testing.T) {
	mac := net.HardwareAddr{0x02, 1, 2, 3, 4, 5}
	f := unsolicitedNAFrame(mac, ma("fd00:cafe::1"))
	require.Equal(t, []byte{0x33, 0x33, 0, 0, 0, 1}, f[0:6])
	ip := f[14:54]
	require.Equal(t, byte(255), ip[7], "hop limit")
	icmp := f[54:]
	require.Equal(t, byte(136), icmp[0])
	require.Equal(t, byte(0xa0), icmp[4], "router and override flags, not solicited")
	// The checksum over the pseudo-header and the message sums to 0xffff.
	var src, dst [16]byte
	copy(src[:], ip[8:24])
	copy(dst[:], ip[24:40])
	require.Equal(t, uint16(0), icmpv6Checksum(src, dst, icmp))
	an, ok := parseAnnouncement(f)
	require.True(t, ok)
	require.Equal(t, ma("fd00:cafe::1"), an.addr)
	require.Equal(t, mac.String(), an.mac.String())
}

type seenAnnouncement struct {
	addr netip.Addr
	mac  net.HardwareAddr
}

// parseAnnouncement recognises a gratuitous ARP or an unsolicited NA.
func parseAnnouncement(f []byte) (seenAnnouncement, bool) {
	if len(f) < 14 {
		return seenAnnouncement{}, false
	}
	switch binary.BigEndian.Uint16(f[12:14]) {
	case ethPARP:
		a := f[14:]
		if len(a) < 28 || !bytes.Equal(a[14:18], a[24:28]) {
			return seenAnnouncement{}, false
		}
		ip, _ := netip.AddrFromSlice(a[14:18])
		return seenAnnouncement{addr: ip, mac: net.HardwareAddr(a[8:14])}, true
	case ethPIPv6:
		if len(f) < 14+40+32 || f[14+6] != unix.IPPROTO_ICMPV6 {
			return seenAnnouncement{}, false
		}
		icmp := f[54:]
		if icmp[0] != 136 || icmp[4]&0x40 != 0 || icmp[24] != 2 {
			return seenAnnouncement{}, false
		}
		ip, _ := netip.AddrFromSlice(icmp[8:24])
		return seenAnnouncement{addr: ip, mac: net.HardwareAddr(icmp[26:32])}, true
	}
	return seenAnnouncement{}, false
}

// sniffer is a raw packet socket on one interface of a namespace.
type sniffer struct{ fd int }

func newSniffer(t *testing.T, ns *testutil.NetNS, ifname string) *sniffer {
	t.Helper()
	s := &sniffer{fd: -1}
	require.NoError(t, ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		s.fd = fd
		tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	}))
	t.Cleanup(func() { _ = unix.Close(s.fd) })
	return s
}

// waitFor reads frames until an announcement of addr from mac arrives.
func (s *sniffer) waitFor(t *testing.T, addr netip.Addr, mac net.HardwareAddr, timeout time.Duration) {
	t.Helper()
	buf := make([]byte, 2048)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		n, _, err := unix.Recvfrom(s.fd, buf, 0)
		if err != nil {
			continue // timeout tick
		}
		if an, ok := parseAnnouncement(buf[:n]); ok && an.addr == addr && an.mac.String() == mac.String() {
			return
		}
	}
	t.Fatalf("no announcement of %s from %s within %s", addr, mac, timeout)
}

func TestGratuitousAnnouncements(t *testing.T) {
	p := testutil.NewNetNS(t, "ga")
	n := testutil.NewNetNS(t, "nb")
	port := vethPair(t, p, "n0p", n, "n0")
	n.MustExec(t, "ip", "addr", "add", "192.0.2.50/24", "dev", "n0")
	n.MustExec(t, "ip", "addr", "add", "fd00:cafe::50/64", "dev", "n0", "nodad")
	sn := newSniffer(t, n, "n0")
	dp := newDP(t, p, Options{AnnounceInterval: 100 * time.Millisecond})
	mac := dp.BridgeMAC()

	s := State{BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24"), mp("fd00:cafe::1/64")}, Ports: []int{port}}
	require.NoError(t, dp.Apply(s))
	sn.waitFor(t, ma("192.0.2.1"), mac, 10*time.Second)
	sn.waitFor(t, ma("fd00:cafe::1"), mac, 10*time.Second)

	// The neighbour holds stale entries for the next addresses (as a
	// target would after the proxy's restart with a new MAC): the
	// announcements after the change fix them at once.
	bogus := "02:00:00:00:00:99"
	n.MustExec(t, "ip", "neigh", "replace", "192.0.2.2", "lladdr", bogus, "dev", "n0", "nud", "stale")
	n.MustExec(t, "ip", "-6", "neigh", "replace", "fd00:cafe::2", "lladdr", bogus, "dev", "n0", "nud", "stale")
	s.BridgeAddrs = []netip.Prefix{mp("192.0.2.2/24"), mp("fd00:cafe::2/64")}
	require.NoError(t, dp.Apply(s))
	sn.waitFor(t, ma("192.0.2.2"), mac, 10*time.Second)
	sn.waitFor(t, ma("fd00:cafe::2"), mac, 10*time.Second)
	eventually(t, func() bool {
		out := n.MustExec(t, "ip", "neigh", "show", "192.0.2.2") + n.MustExec(t, "ip", "-6", "neigh", "show", "fd00:cafe::2")
		return strings.Count(out, "lladdr "+mac.String()) == 2
	}, "the neighbour's cache holds the bridge's MAC")
	require.Positive(t, dp.Stats().Announcements)
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
	for _, a := range []string{"10.9.0.2", "fd09::2"} {
		peer.MustExec(t, "ip", "neigh", "replace", a, "lladdr", "02:00:00:00:00:99", "dev", "p0", "nud", "stale")
	}
	mac := strings.TrimSpace(host.MustExec(t, "cat", "/sys/class/net/h0/address"))

	// Announce in rounds, as callers do: a link that has just come up may
	// miss the first frames.
	for _, a := range []string{"10.9.0.2", "fd09::2"} {
		require.Eventually(t, func() bool {
			require.NoError(t, Announce(host.Handle, "h0", []netip.Addr{ma("10.9.0.2"), ma("fd09::2")}))
			return strings.Contains(peer.MustExec(t, "ip", "neigh", "show", a, "dev", "p0"), mac)
		}, 10*time.Second, 100*time.Millisecond, "the peer's entry for %s must move to %s", a, mac)
	}
	require.Error(t, Announce(host.Handle, "nope0", []netip.Addr{ma("10.9.0.2")}))
}
