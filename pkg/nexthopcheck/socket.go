package nexthopcheck

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"
	"unsafe"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/netnsdo"
)

// ErrNotPermitted is the error of a probe socket that the namespace's
// net.ipv4.ping_group_range does not allow to the process's group.
var ErrNotPermitted = errors.New("ICMP echo sockets not permitted: net.ipv4.ping_group_range of the namespace does not include the process's group")

// ICMP echo types: request and reply of each family.
const (
	echoRequest4 = 8
	echoReply4   = 0
	echoRequest6 = 128
	echoReply6   = 129
)

// echoHeaderLen is the ICMP echo header: type, code, checksum, identifier,
// sequence. The kernel fills the identifier (the socket's) and the
// checksum.
const echoHeaderLen = 8

// echoSocket is a ping socket of one family, bound to one link.
type echoSocket struct {
	fd   int
	v6   bool
	link int
	buf  []byte // receive buffer
	oob  []byte // receive control messages (the kernel's timestamp)

	rcvbuf int // the receive buffer size asked for
	// drops is the kernel's count of datagrams the socket dropped (its
	// buffer full), as of the last drain; logged is its value when last
	// logged.
	drops, logged uint32
}

// sockKey names the socket a peer's probes use.
type sockKey struct {
	v6   bool
	link int
}

func keyOf(p Peer) sockKey { return sockKey{v6: p.Addr.Is6(), link: p.LinkIndex} }

// openEchoSocket opens the ping socket of k in ns.
func openEchoSocket(ns netns.NsHandle, k sockKey) (*echoSocket, error) {
	family, proto := unix.AF_INET, unix.IPPROTO_ICMP
	if k.v6 {
		family, proto = unix.AF_INET6, unix.IPPROTO_ICMPV6
	}
	var fd int
	err := netnsdo.Do(ns, func() error {
		var err error
		fd, err = unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
		return err
	})
	if errors.Is(err, unix.EACCES) {
		return nil, fmt.Errorf("open probe socket (ipv6 %t): %w", k.v6, ErrNotPermitted)
	}
	if err != nil {
		return nil, fmt.Errorf("open probe socket (ipv6 %t): %w", k.v6, err)
	}
	s := &echoSocket{fd: fd, v6: k.v6, link: k.link, buf: make([]byte, 512), oob: make([]byte, 128)}
	if err := s.configure(); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	return s, nil
}

// configure binds the socket to its link and asks for receive timestamps.
func (s *echoSocket) configure() error {
	if s.link > 0 {
		if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_BINDTOIFINDEX, s.link); err != nil {
			return fmt.Errorf("bind probe socket to link %d: %w", s.link, err)
		}
	}
	if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return fmt.Errorf("probe socket timestamps: %w", err)
	}
	return nil
}

// Receive buffer sizing: every peer's answer of a tick must fit, as the
// socket is read once a tick (an answer takes about 1 KiB of buffer).
const (
	rcvbufPerPeer = 2 << 10
	rcvbufMin     = 64 << 10
)

// sizeFor sizes the receive buffer for peers answers at once. With
// CAP_NET_ADMIN it may exceed net.core.rmem_max; without, the kernel caps
// it there (best effort either way: an answer that does not fit is a lost
// probe).
func (s *echoSocket) sizeFor(peers int) {
	n := max(rcvbufMin, peers*rcvbufPerPeer)
	if n == s.rcvbuf {
		return
	}
	if unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n) != nil {
		_ = unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, n)
	}
	s.rcvbuf = n
}

func (s *echoSocket) close() error { return unix.Close(s.fd) }

// send sends one echo request with seq and payload to addr.
func (s *echoSocket) send(addr netip.Addr, seq uint16, payload []byte, pkt []byte) error {
	pkt = pkt[:0]
	typ := byte(echoRequest4)
	if s.v6 {
		typ = echoRequest6
	}
	pkt = append(pkt, typ, 0, 0, 0, 0, 0, byte(seq>>8), byte(seq))
	pkt = append(pkt, payload...)
	return unix.Sendto(s.fd, pkt, 0, s.sockaddr(addr))
}

func (s *echoSocket) sockaddr(addr netip.Addr) unix.Sockaddr {
	if !s.v6 {
		return &unix.SockaddrInet4{Addr: addr.As4()}
	}
	sa := &unix.SockaddrInet6{Addr: addr.As16()}
	if addr.IsLinkLocalUnicast() {
		sa.ZoneId = uint32(s.link)
	}
	return sa
}

// reply is one echo reply read from a socket.
type reply struct {
	from    netip.Addr
	seq     uint16
	payload []byte // valid until the next read
	at      time.Time
}

// drain reads every queued datagram without waiting and hands each echo
// reply to fn. It returns the first error other than "nothing left".
func (s *echoSocket) drain(fn func(reply)) error {
	for {
		n, oobn, _, from, err := unix.Recvmsg(s.fd, s.buf, s.oob, unix.MSG_DONTWAIT)
		if errors.Is(err, unix.EAGAIN) {
			return nil
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read probe socket: %w", err)
		}
		at := rxTime(s.oob[:oobn])
		if r, ok := s.parse(s.buf[:n], at, from); ok {
			fn(r)
		}
	}
}

// parse decodes an echo reply; anything else is not ours.
func (s *echoSocket) parse(b []byte, at time.Time, from unix.Sockaddr) (reply, bool) {
	want := byte(echoReply4)
	if s.v6 {
		want = echoReply6
	}
	if len(b) < echoHeaderLen || b[0] != want || b[1] != 0 {
		return reply{}, false
	}
	r := reply{seq: binary.BigEndian.Uint16(b[6:8]), payload: b[echoHeaderLen:], at: at}
	switch sa := from.(type) {
	case *unix.SockaddrInet4:
		r.from = netip.AddrFrom4(sa.Addr)
	case *unix.SockaddrInet6:
		r.from = netip.AddrFrom16(sa.Addr).Unmap()
	default:
		return reply{}, false
	}
	return r, true
}

// rxTime is the kernel's receive time from a datagram's control messages
// (zero when there is none).
func rxTime(oob []byte) time.Time {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
			return time.Unix(sec, nsec)
		}
	}
	return time.Time{}
}

// skMeminfoDrops is SK_MEMINFO_DROPS, the index of the drop count in the
// SO_MEMINFO array, and skMeminfoVars its length.
const (
	skMeminfoDrops = 8
	skMeminfoVars  = 9
)

// readDrops updates the kernel's count of datagrams the socket dropped
// (ping sockets do not report it as a control message, SO_RXQ_OVFL).
func (s *echoSocket) readDrops() error {
	var info [skMeminfoVars]uint32
	n := uint32(unsafe.Sizeof(info))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&n)), 0)
	if errno != 0 {
		return fmt.Errorf("probe socket drop count: %w", errno)
	}
	s.drops = info[skMeminfoDrops]
	return nil
}

// dropsToLog returns the drop count when it has at least doubled since it
// was last logged (so a full buffer is logged a few times, not at every
// tick), and whether it has.
func (s *echoSocket) dropsToLog() (uint32, bool) {
	if s.drops == 0 || s.drops < 2*s.logged {
		return 0, false
	}
	s.logged = s.drops
	return s.drops, true
}
