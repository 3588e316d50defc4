package relay

import (
	"fmt"
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TCP keepalive of relayed connections, both sides: Go's defaults for
// accepted and dialled connections (idle 15 s, then a probe every 15 s,
// 9 probes), so a pair whose peer vanished silently ends. A dialled
// socket gets it once its pair has lived keepAliveDelay: most connections
// end before, and then never pay for the four setsockopt calls.
const (
	KeepAliveIdleSeconds     = 15
	KeepAliveIntervalSeconds = 15
	KeepAliveCount           = 9
)

// keepAliveDelay is how long a pair relays before its endpoint's socket
// gets keepalive (probes would only start after KeepAliveIdleSeconds of
// silence anyway). A variable for tests.
var keepAliveDelay = 5 * time.Second

// StreamOptions sets on a TCP socket what every relayed socket has: no
// Nagle delay (the relay sends what it got when it got it) and keepalive as
// above. Set on a listening socket, the kernel copies them to each accepted
// one.
func StreamOptions(fd int) error {
	if err := noDelay(fd); err != nil {
		return err
	}
	return keepAlive(fd)
}

func noDelay(fd int) error {
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return fmt.Errorf("socket option TCP_NODELAY: %w", err)
	}
	return nil
}

func keepAlive(fd int) error {
	opts := [...]struct {
		name              string
		level, opt, value int
	}{
		{"SO_KEEPALIVE", unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
		{"TCP_KEEPIDLE", unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, KeepAliveIdleSeconds},
		{"TCP_KEEPINTVL", unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, KeepAliveIntervalSeconds},
		{"TCP_KEEPCNT", unix.IPPROTO_TCP, unix.TCP_KEEPCNT, KeepAliveCount},
	}
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, o.level, o.opt, o.value); err != nil {
			return fmt.Errorf("socket option %s: %w", o.name, err)
		}
	}
	return nil
}

// sockaddr is ap as a socket address of its own family.
func sockaddr(ap netip.AddrPort) (int, unix.Sockaddr) {
	a := ap.Addr().Unmap()
	if a.Is4() {
		return unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}
	}
	return unix.AF_INET6, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: a.As16()}
}

// addrPort is a socket address as an AddrPort, IPv4-mapped addresses
// unmapped (zero for other kinds).
func addrPort(sa unix.Sockaddr) netip.AddrPort {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(sa.Port))
	}
	return netip.AddrPort{}
}

// accept takes a connection from a listening socket, non-blocking, with
// the client's address. (unix.Accept4 would also ask the listener for its
// protocol on every call, to tell L2TP sockets apart.)
func accept(lfd int) (int, netip.AddrPort, error) {
	var rsa unix.RawSockaddrAny
	size := uint32(unsafe.Sizeof(rsa))
	fd, _, errno := unix.Syscall6(unix.SYS_ACCEPT4, uintptr(lfd), uintptr(unsafe.Pointer(&rsa)),
		uintptr(unsafe.Pointer(&size)), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	if errno != 0 {
		return -1, netip.AddrPort{}, errno
	}
	return int(fd), rawAddrPort(&rsa), nil
}

// rawAddrPort decodes an IPv4 or IPv6 socket address (zero for others).
func rawAddrPort(rsa *unix.RawSockaddrAny) netip.AddrPort {
	switch rsa.Addr.Family {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(rsa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), ntohs(sa.Port))
	case unix.AF_INET6:
		sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(rsa))
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), ntohs(sa.Port))
	}
	return netip.AddrPort{}
}

// ntohs reads a port as the kernel stores it (network byte order).
func ntohs(p uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(&p))
	return uint16(b[0])<<8 | uint16(b[1])
}

// streamSocket is a non-blocking TCP socket of family.
func streamSocket(family int) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	return fd, nil
}

// closeFD closes fd, first asking for a reset instead of an orderly close
// when reset is set (which also leaves no TIME_WAIT behind).
func closeFD(fd int, reset bool) {
	if reset {
		_ = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	}
	_ = unix.Close(fd)
}
