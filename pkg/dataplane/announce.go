package dataplane

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/netnsdo"
)

const (
	ethPARP  = 0x0806
	ethPIPv6 = 0x86dd
)

// garpFrame builds a gratuitous ARP request (sender and target protocol
// address both addr) from mac, broadcast, padded to the Ethernet minimum.
func garpFrame(mac net.HardwareAddr, addr netip.Addr) []byte {
	f := make([]byte, 60)
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], mac)
	binary.BigEndian.PutUint16(f[12:14], ethPARP)
	a := f[14:]
	binary.BigEndian.PutUint16(a[0:2], 1)      // hardware type: Ethernet
	binary.BigEndian.PutUint16(a[2:4], 0x0800) // protocol type: IPv4
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:8], 1) // request
	copy(a[8:14], mac)
	ip := addr.As4()
	copy(a[14:18], ip[:])
	// target hardware address stays zero
	copy(a[24:28], ip[:])
	return f
}

// unsolicitedNAFrame builds an unsolicited neighbour advertisement for addr
// from mac to all nodes (ff02::1), with the Override and Router flags set and
// a target link-layer address option, as the kernel sends one itself.
func unsolicitedNAFrame(mac net.HardwareAddr, addr netip.Addr) []byte {
	const icmpLen = 24 + 8
	f := make([]byte, 14+40+icmpLen)
	dst := netip.MustParseAddr("ff02::1").As16()
	copy(f[0:6], []byte{0x33, 0x33, 0, 0, 0, 1})
	copy(f[6:12], mac)
	binary.BigEndian.PutUint16(f[12:14], ethPIPv6)
	ip := f[14:54]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:6], icmpLen)
	ip[6] = unix.IPPROTO_ICMPV6
	ip[7] = 255 // hop limit, required by RFC 4861
	src := addr.As16()
	copy(ip[8:24], src[:])
	copy(ip[24:40], dst[:])
	icmp := f[54:]
	icmp[0] = 136         // neighbour advertisement
	icmp[4] = 0x80 | 0x20 // Router | Override (not Solicited)
	copy(icmp[8:24], src[:])
	icmp[24] = 2 // option: target link-layer address
	icmp[25] = 1 // length in units of 8 octets
	copy(icmp[26:32], mac)
	binary.BigEndian.PutUint16(icmp[2:4], icmpv6Checksum(src, dst, icmp))
	return f
}

func icmpv6Checksum(src, dst [16]byte, msg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(src[:])
	add(dst[:])
	var pl [8]byte
	binary.BigEndian.PutUint32(pl[0:4], uint32(len(msg)))
	pl[7] = unix.IPPROTO_ICMPV6
	add(pl[:])
	add(msg)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// announcement is what to announce: the bridge's addresses and MAC.
type announcement struct {
	ifindex int
	mac     net.HardwareAddr
	addrs   []netip.Addr
}

// announcer sends gratuitous ARPs and unsolicited NAs from the bridge. A
// trigger starts (or restarts) a burst of count rounds, interval apart; each
// round announces every current bridge address, so triggers that come close
// together coalesce.
type announcer struct {
	fd       int // AF_PACKET socket opened in the namespace; -1 if none
	count    int
	interval time.Duration
	trigger  chan struct{}
	current  func() (announcement, bool)
	sent     func(n int)
	logf     func(msg string, args ...any)
}

func newAnnouncer(ns netns.NsHandle, count int, interval time.Duration) (*announcer, error) {
	a := &announcer{fd: -1, count: count, interval: interval, trigger: make(chan struct{}, 1)}
	if count <= 0 {
		return a, nil
	}
	err := netnsdo.Do(ns, func() error {
		// Protocol 0: this socket only sends, it receives nothing.
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		a.fd = fd
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("open packet socket for GARP/NA: %w", err)
	}
	return a, nil
}

// kick asks for a burst; it never blocks.
func (a *announcer) kick() {
	if a.fd < 0 {
		return
	}
	select {
	case a.trigger <- struct{}{}:
	default:
	}
}

func (a *announcer) run(ctx context.Context) {
	if a.fd < 0 {
		return
	}
	// A trigger sends a round at once (unless one went out less than
	// minGap ago, so that a storm of triggers costs at most one round per
	// minGap) and restarts the burst.
	const minGap = 20 * time.Millisecond
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	remaining := 0
	var last time.Time
	fire := func() {
		a.round()
		last = time.Now()
		remaining--
		if remaining > 0 {
			timer.Reset(a.interval)
		}
	}
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-a.trigger:
			remaining = a.count
			if time.Since(last) >= minGap {
				timer.Stop()
				fire()
			} else {
				timer.Reset(minGap)
			}
		case <-timer.C:
			if remaining > 0 {
				fire()
			}
		}
	}
}

func (a *announcer) round() {
	an, ok := a.current()
	if !ok || an.ifindex == 0 || len(an.mac) != 6 {
		return
	}
	n := 0
	for _, addr := range an.addrs {
		if err := a.send(an, addr); err != nil {
			a.logf("announce failed", "addr", addr, "error", err)
			continue
		}
		n++
	}
	if n > 0 {
		a.sent(n)
	}
}

func (a *announcer) send(an announcement, addr netip.Addr) error {
	var frame []byte
	var proto uint16
	var dst []byte
	if addr.Is4() {
		frame, proto = garpFrame(an.mac, addr), ethPARP
		dst = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	} else {
		frame, proto = unsolicitedNAFrame(an.mac, addr), ethPIPv6
		dst = []byte{0x33, 0x33, 0, 0, 0, 1}
	}
	sa := &unix.SockaddrLinklayer{Protocol: htons(proto), Ifindex: an.ifindex, Halen: 6}
	copy(sa.Addr[:], dst)
	err := unix.Sendto(a.fd, frame, 0, sa)
	if errors.Is(err, unix.ENETDOWN) || errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("bridge %d not up: %w", an.ifindex, err)
	}
	return err
}

func (a *announcer) close() {
	if a.fd >= 0 {
		_ = unix.Close(a.fd)
		a.fd = -1
	}
}

// htons converts v to network byte order as the kernel reads it from a
// sockaddr field.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// Announce sends one gratuitous ARP (IPv4) or unsolicited neighbour
// advertisement (IPv6) per address from the interface ifname of the
// namespace ns (netns.None() or zero: the caller's), so that neighbours
// holding a stale entry for an address that moved to this interface update
// it at once. It is for hosts attached to the bridge, such as targets that
// reuse released addresses; the Dataplane announces the bridge itself.
func Announce(ns netns.NsHandle, ifname string, addrs []netip.Addr) error {
	if ns <= 0 {
		var err error
		if ns, err = netns.Get(); err != nil {
			return fmt.Errorf("announce: current netns: %w", err)
		}
		defer ns.Close()
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("announce: netlink handle: %w", err)
	}
	defer h.Close()
	link, err := h.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("announce: link %s: %w", ifname, err)
	}
	a, err := newAnnouncer(ns, 1, 0)
	if err != nil {
		return err
	}
	defer a.close()
	an := announcement{ifindex: link.Attrs().Index, mac: link.Attrs().HardwareAddr}
	var errs []error
	for _, addr := range addrs {
		if err := a.send(an, addr.Unmap()); err != nil {
			errs = append(errs, fmt.Errorf("announce %s on %s: %w", addr, ifname, err))
		}
	}
	return errors.Join(errs...)
}
