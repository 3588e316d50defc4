package nexthopcheck

import (
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/testutil"
)

// bed is a proxy's namespace with a bridge, and peers behind it: each peer
// namespace has one veth whose proxy end is a port of the bridge.
type bed struct {
	proxy  *testutil.NetNS
	bridge int // the bridge's link index in proxy
}

// The bridge's addresses; peers take theirs in the same subnets.
var (
	bridge4 = netip.MustParsePrefix("10.77.0.1/16")
	bridge6 = netip.MustParsePrefix("fd77::1/64")
)

// newBed makes the proxy's namespace. Its ping_group_range is what the
// dataplane sets in a proxy's namespace (see docs/dataplane.md).
func newBed(t *testing.T) *bed {
	p := testutil.NewNetNS(t, "nhc")
	p.MustExec(t, "sysctl", "-qw", "net.ipv4.ping_group_range=0 2147483647")
	p.MustExec(t, "ip", "link", "add", "br0", "type", "bridge")
	p.MustExec(t, "ip", "link", "set", "br0", "up")
	p.MustExec(t, "ip", "addr", "add", bridge4.String(), "dev", "br0")
	p.MustExec(t, "ip", "addr", "add", bridge6.String(), "dev", "br0", "nodad")
	return &bed{proxy: p, bridge: p.LinkIndex(t, "br0")}
}

// addPeer makes a peer namespace on a new port of the bridge, with addrs on
// its eth0; it returns the namespace and the port's name.
func (b *bed) addPeer(t *testing.T, n int, addrs ...netip.Addr) (*testutil.NetNS, string) {
	ns := testutil.NewNetNS(t, fmt.Sprintf("nhp%d", n))
	port := fmt.Sprintf("p%d", n)
	b.proxy.MustExec(t, "ip", "link", "add", port, "master", "br0", "type", "veth", "peer", "name", "eth0", "netns", ns.Name)
	b.proxy.MustExec(t, "ip", "link", "set", port, "up")
	ns.MustExec(t, "ip", "link", "set", "eth0", "up")
	h, err := netlink.NewHandleAt(ns.Handle)
	require.NoError(t, err)
	defer h.Close()
	link, err := h.LinkByName("eth0")
	require.NoError(t, err)
	for _, a := range addrs {
		bits := bridge4.Bits()
		if a.Is6() {
			bits = bridge6.Bits()
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, a.BitLen())}, Flags: 0}
		if a.Is6() {
			addr.Flags = nodad
		}
		require.NoError(t, h.AddrAdd(link, addr), "address %s", a)
	}
	return ns, port
}

// nodad is IFA_F_NODAD: an IPv6 address usable at once.
const nodad = 0x02

// peer4 and peer6 are the n-th peer addresses of each family.
func peer4(n int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 77, byte(1 + n/250), byte(1 + n%250)})
}
func peer6(n int) netip.Addr {
	return netip.AddrFrom16([16]byte{0: 0xfd, 1: 0x77, 14: byte((n + 2) >> 8), 15: byte(n + 2)})
}

// dropAll makes ns drop every packet it receives (its datapath is broken,
// its link stays up); the returned function mends it.
func dropAll(t *testing.T, ns *testutil.NetNS) func() {
	return nftInput(t, ns, "drop")
}

// nftInput adds a table with an input chain holding rule to ns; the
// returned function deletes the table.
func nftInput(t *testing.T, ns *testutil.NetNS, rule string) func() {
	ns.MustExec(t, "nft", fmt.Sprintf("add table inet nhc; add chain inet nhc in { type filter hook input priority 0; }; add rule inet nhc in %s", rule))
	return func() { ns.MustExec(t, "nft", "delete table inet nhc") }
}

// peers4 are the first n IPv4 peers on the bridge.
func (b *bed) peers4(n int) []Peer {
	var out []Peer
	for i := range n {
		out = append(out, Peer{peer4(i), b.bridge})
	}
	return out
}

func addrsOf(peers []Peer) []netip.Addr {
	var out []netip.Addr
	for _, p := range peers {
		out = append(out, p.Addr)
	}
	return out
}
