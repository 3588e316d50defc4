package dataplane

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/testutil"
)

// rawSocket is an AF_PACKET socket on eth0 of a namespace: it sends whole
// frames and sees every frame the interface receives.
type rawSocket struct {
	fd, ifindex int
}

func openRaw(t *testing.T, ns *testutil.NetNS) *rawSocket {
	t.Helper()
	r := &rawSocket{ifindex: ns.LinkIndex(t, "eth0")}
	require.NoError(t, ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		r.fd = fd
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: r.ifindex})
	}))
	t.Cleanup(func() { _ = unix.Close(r.fd) })
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	require.NoError(t, unix.SetsockoptTimeval(r.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv))
	return r
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (r *rawSocket) send(t *testing.T, frame []byte) {
	t.Helper()
	require.NoError(t, unix.Sendto(r.fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: r.ifindex, Halen: 6}))
}

// capture collects the frames r receives until stop is called.
func (r *rawSocket) capture() (frames func() [][]byte, stop func()) {
	var mu sync.Mutex
	var got [][]byte
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		buf := make([]byte, 2048)
		for {
			select {
			case <-done:
				return
			default:
			}
			n, _, err := unix.Recvfrom(r.fd, buf, 0)
			if err != nil {
				continue // the receive timeout: look at done again
			}
			mu.Lock()
			got = append(got, bytes.Clone(buf[:n]))
			mu.Unlock()
		}
	}()
	frames = func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	return frames, func() { close(done); <-finished }
}

// probe is a frame sent over the bridge and the marker that finds it.
type probe struct {
	frame  []byte
	marker string
}

var broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ether frames payload; the marker goes after it (ARP carries it as
// padding: IP payloads carry their own, since br_netfilter trims a frame
// to its IP length).
func ether(dst, src net.HardwareAddr, typ uint16, payload []byte, marker string) []byte {
	f := append(append(bytes.Clone(dst), src...), byte(typ>>8), byte(typ))
	return append(append(f, payload...), marker...)
}

// garp is a gratuitous ARP reply: addr is at mac.
func garp(mac net.HardwareAddr, addr netip.Addr) []byte {
	p := []byte{0, 1, 8, 0, 6, 4, 0, 2}
	p = append(append(p, mac...), addr.AsSlice()...)
	return append(append(p, broadcast...), addr.AsSlice()...)
}

// unsolicitedNA is an IPv6 neighbour advertisement from src, to all nodes:
// target is at mac.
func unsolicitedNA(src, target netip.Addr, mac net.HardwareAddr, marker string) []byte {
	icmp := []byte{icmp6NA, 0, 0, 0, 0x20, 0, 0, 0}
	icmp = append(append(icmp, target.AsSlice()...), 2, 1)
	icmp = append(icmp, mac...)
	icmp = append(append(icmp, 250, 1, 0, 0), marker...) // an unknown option, ignored
	ip := []byte{0x60, 0, 0, 0, 0, byte(len(icmp)), unix.IPPROTO_ICMPV6, 255}
	ip = append(append(ip, src.AsSlice()...), netip.MustParseAddr("ff02::1").AsSlice()...)
	return append(ip, icmp...)
}

// udp4 is an IPv4 UDP datagram from src to dst.
func udp4(src, dst netip.Addr, marker string) []byte {
	ip := []byte{0x45, 0, 0, byte(28 + len(marker)), 0, 0, 0, 0, 64, unix.IPPROTO_UDP, 0, 0}
	ip = append(append(ip, src.AsSlice()...), dst.AsSlice()...)
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	return append(append(ip, 0x30, 0x39, 0x30, 0x39, 0, byte(8+len(marker)), 0, 0), marker...)
}

func macOf(t *testing.T, ns *testutil.NetNS) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	require.NoError(t, ns.Do(func() error {
		i, err := net.InterfaceByName("eth0")
		if err == nil {
			mac = i.HardwareAddr
		}
		return err
	}))
	return mac
}

// TestPortFilterStopsSpoofing performs the attacks of a target on its
// neighbours over the bridge: a target sends ARP, neighbour advertisements
// and IPv4 from another target's addresses, from another target's MAC and
// from a second MAC of its own. None reaches another port of the bridge (a
// load balancer's, where they would poison its neighbour cache), while the
// same target's frames from its own MAC and addresses do.
func TestPortFilterStopsSpoofing(t *testing.T) {
	tp := newTopology(t)
	dp := newDP(t, tp.P, Options{})
	s := tp.state()
	port1 := slices.IndexFunc(s.Ports, func(p Port) bool { return p.Index == tp.ports["t1p"] })
	port2 := slices.IndexFunc(s.Ports, func(p Port) bool { return p.Index == tp.ports["t2p"] })
	s.Ports[port1].Filter = &PortFilter{Addrs: []netip.Addr{ma(targetAddr4[0]), ma(targetAddr6[0])}}
	s.Ports[port2].Filter = &PortFilter{Addrs: []netip.Addr{ma(targetAddr4[1]), ma(targetAddr6[1])}}
	start := time.Now()
	require.NoError(t, dp.Apply(s))
	t.Logf("FIGURE: Apply with 2 port filters (table built): %v", time.Since(start))
	ok, err := portFilterTableExists(tp.P.Handle)
	require.NoError(t, err)
	require.True(t, ok, "the port filter table exists")

	// Legitimate traffic of both targets through the filter (and each
	// port's MAC taken on first use).
	for i, tg := range []*testutil.NetNS{tp.T1, tp.T2} {
		tg.MustExec(t, "ping", "-c", "1", "-W", "5", "-I", targetAddr4[i], lbAddr4[0])
		tg.MustExec(t, "ping", "-6", "-c", "1", "-W", "5", "-I", targetAddr6[i], lbAddr6[0])
	}

	mac1, mac2 := macOf(t, tp.T1), macOf(t, tp.T2)
	other := net.HardwareAddr{0x02, 0xca, 0xfe, 0, 0, 0x99}
	t1, t2, lb := ma(targetAddr4[0]), ma(targetAddr4[1]), ma(lbAddr4[0])
	t16, t26 := ma(targetAddr6[0]), ma(targetAddr6[1])
	attacks := map[string]probe{
		"ARP claiming T2's address":        {frame: ether(broadcast, mac1, etherARP, garp(mac1, t2), "ATK1"), marker: "ATK1"},
		"NA claiming T2's address":         {frame: ether(broadcast, mac1, etherIPv6, unsolicitedNA(t16, t26, mac1, "ATK2"), ""), marker: "ATK2"},
		"IPv4 from T2's address":           {frame: ether(broadcast, mac1, etherIPv4, udp4(t2, lb, "ATK3"), ""), marker: "ATK3"},
		"NA sent from T2's address":        {frame: ether(broadcast, mac1, etherIPv6, unsolicitedNA(t26, t26, mac1, "ATK4"), ""), marker: "ATK4"},
		"own address from T2's MAC":        {frame: ether(broadcast, mac2, etherIPv4, udp4(t1, lb, "ATK5"), ""), marker: "ATK5"},
		"own address from a second MAC":    {frame: ether(broadcast, other, etherARP, garp(other, t1), "ATK6"), marker: "ATK6"},
		"ARP naming another sender MAC":    {frame: ether(broadcast, mac1, etherARP, garp(mac2, t1), "ATK7"), marker: "ATK7"},
		"VLAN-tagged frame (not filtered)": {frame: ether(broadcast, mac1, 0x8100, append([]byte{0, 5, 8, 0}, udp4(t2, lb, "ATK8")...), ""), marker: "ATK8"},
	}
	legit := map[string]probe{
		"ARP for its own address":   {frame: ether(broadcast, mac1, etherARP, garp(mac1, t1), "OK01"), marker: "OK01"},
		"NA for its own address":    {frame: ether(broadcast, mac1, etherIPv6, unsolicitedNA(t16, t16, mac1, "OK02"), ""), marker: "OK02"},
		"IPv4 from its own address": {frame: ether(broadcast, mac1, etherIPv4, udp4(t1, lb, "OK03"), ""), marker: "OK03"},
		"IPv4 from a VIP":           {frame: ether(broadcast, mac1, etherIPv4, udp4(vip4, lb, "OK04"), ""), marker: "OK04"},
	}

	frames, stop := openRaw(t, tp.LB1).capture()
	defer stop()
	sender := openRaw(t, tp.T1)
	for _, p := range attacks {
		sender.send(t, p.frame)
	}
	for _, p := range legit {
		sender.send(t, p.frame)
	}
	seen := func(marker string) bool {
		for _, f := range frames() {
			if bytes.Contains(f, []byte(marker)) {
				return true
			}
		}
		return false
	}
	// The legitimate frames were sent after the attacks, on the same path:
	// once they are all in, any attack that got through is in too.
	eventually(t, func() bool {
		for name, p := range legit {
			if !seen(p.marker) {
				t.Logf("waiting for: %s", name)
				return false
			}
		}
		return true
	}, "the legitimate frames reach the load balancer's port")
	for name, p := range attacks {
		require.False(t, seen(p.marker), "attack reached another port: %s", name)
	}

	// A target's port that leaves frees its MAC; the table goes with the
	// last filter, and with Teardown.
	s.Ports[port1].Filter = nil
	require.NoError(t, dp.Apply(s))
	require.NoError(t, dp.Teardown())
	ok, err = portFilterTableExists(tp.P.Handle)
	require.NoError(t, err)
	require.False(t, ok, "Teardown removes the port filter table")
}

func TestIntervalElementsMergeAndEnd(t *testing.T) {
	els := intervalElements(v4, []netip.Prefix{mp("10.0.0.1/32"), mp("10.0.0.0/24"), mp("10.0.1.0/24"), mp("255.255.255.255/32")})
	var got []string
	for _, e := range els {
		a, _ := netip.AddrFromSlice(e.Key)
		got = append(got, fmt.Sprintf("%v/%t", a, e.IntervalEnd))
	}
	require.Equal(t, []string{"0.0.0.0/true", "10.0.0.0/false", "10.0.2.0/true", "255.255.255.255/false"}, got)
}
