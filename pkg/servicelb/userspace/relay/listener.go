package relay

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/pkg/servicelb"
)

// Service is what a Listener asks about each connection it accepts.
type Service struct {
	// Pick chooses the endpoint for client; reset is set after a failed
	// dial, so that a sticky client moves on.
	Pick func(client netip.AddrPort, reset bool) (netip.AddrPort, error)
	// Record receives the connection's events (EndpointChosen, DialFailed,
	// NoEndpoints, ReadError for a failed accept).
	Record func(reason servicelb.EventReason, client, endpoint netip.AddrPort, err error)
}

// acceptPause is how long a listener rests after an accept error such as
// "too many open files" before it accepts again.
const acceptPause = 20 * time.Millisecond

// Listener is a listening TCP socket whose connections the loop relays.
type Listener struct {
	loop   *Loop
	addr   netip.AddrPort
	done   chan struct{} // closed with the socket
	active atomic.Int64  // pairs, dials in flight included

	mu sync.Mutex
	fd int // -1 once closed

	// Owned by the loop's thread.
	svc Service
	id  uint64
}

// Listen opens a listening TCP socket on ip:port (all addresses of both
// families when ip is :: or unset, as Go's net.Listen; port 0: the kernel's
// choice) in the caller's namespace. Serve hands it to the loop.
func (l *Loop) Listen(ip netip.Addr, port int) (*Listener, error) {
	dualStack := !ip.IsValid() || ip == netip.IPv6Unspecified()
	family, sa := unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{Port: port})
	if !dualStack {
		family, sa = sockaddr(netip.AddrPortFrom(ip, uint16(port)))
	}
	fd, err := streamSocket(family)
	if errors.Is(err, unix.EAFNOSUPPORT) && dualStack {
		// No IPv6 here: all IPv4 addresses, as Go's net.Listen does.
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: port}
		fd, err = streamSocket(family)
	}
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", netip.AddrPortFrom(ip, uint16(port)), err)
	}
	err = listen(fd, sa)
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("listen %s: %w", netip.AddrPortFrom(ip, uint16(port)), err)
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("listen: bound address: %w", err)
	}
	ln := &Listener{loop: l, fd: fd, addr: addrPort(bound), done: make(chan struct{})}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("listen %s: %w", ln.addr, ErrClosed)
	}
	l.listeners[ln] = struct{}{}
	return ln, nil
}

func listen(fd int, sa unix.Sockaddr) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return err
	}
	if sa6, ok := sa.(*unix.SockaddrInet6); ok && sa6.Addr == [16]byte{} {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
			return err
		}
	}
	if err := StreamOptions(fd); err != nil {
		return err
	}
	if err := unix.Bind(fd, sa); err != nil {
		return err
	}
	return unix.Listen(fd, unix.SOMAXCONN)
}

// Addr is the bound address.
func (ln *Listener) Addr() netip.AddrPort { return ln.addr }

// Connections is the number of the listener's connections being relayed
// or dialled; they outlive Close until they end.
func (ln *Listener) Connections() int { return int(ln.active.Load()) }

// Serve accepts and relays for svc until Close, then returns; the
// connections in flight go on until they end or CloseConnections.
func (ln *Listener) Serve(svc Service) error {
	err := ln.loop.doWait(func() {
		ln.mu.Lock()
		defer ln.mu.Unlock()
		if ln.fd < 0 {
			return
		}
		ln.svc = svc
		id, err := ln.loop.register(ln.fd, unix.EPOLLIN, ln)
		if err != nil {
			ln.loop.log.Error("relay: serve listener", "addr", ln.addr.String(), "error", err)
			ln.closeLocked()
			return
		}
		ln.id = id
	})
	if err != nil {
		ln.closeFD()
		return err
	}
	<-ln.done
	return nil
}

// Close stops accepting and closes the socket; connections in flight go on.
func (ln *Listener) Close() error {
	if err := ln.loop.doWait(func() { ln.close(ln.loop) }); err != nil {
		ln.closeFD() // the loop is gone: nothing else uses the socket
	}
	return nil
}

// CloseConnections aborts the listener's relayed connections and pending
// dials with a reset.
func (ln *Listener) CloseConnections() {
	_ = ln.loop.doWait(func() {
		for p := range ln.loop.pairs {
			if p.ln == ln {
				p.abort(ln.loop)
			}
		}
	})
}

// close runs on the loop's thread.
func (ln *Listener) close(l *Loop) {
	if ln.id != 0 {
		l.forget(ln.fd, ln.id, false) // closing the socket takes it out of the set
		ln.id = 0
	}
	ln.closeFD()
}

func (ln *Listener) closeFD() {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	ln.closeLocked()
}

func (ln *Listener) closeLocked() {
	if ln.fd < 0 {
		return
	}
	_ = unix.Close(ln.fd)
	ln.fd = -1
	close(ln.done)
	ln.loop.mu.Lock()
	delete(ln.loop.listeners, ln)
	ln.loop.mu.Unlock()
}

// handle accepts one connection per readiness: the socket stays readable
// while more wait (epoll is level-triggered), so a flood on one port takes
// turns with the others, and a lone connection costs no accept that finds
// nothing.
func (ln *Listener) handle(l *Loop, _ uint32) {
	fd, client, err := accept(ln.fd)
	switch {
	case err == nil:
		startPair(l, ln, fd, client)
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR), errors.Is(err, unix.ECONNABORTED):
	default:
		ln.svc.Record(servicelb.EventReadError, netip.AddrPort{}, netip.AddrPort{}, fmt.Errorf("accept: %w", err))
		ln.rest(l)
	}
}

// rest stops accepting for acceptPause (the error would repeat at once).
func (ln *Listener) rest(l *Loop) {
	id := ln.id
	if err := l.modify(ln.fd, id, 0); err != nil {
		return
	}
	l.after(acceptPause, func() {
		if ln.id == id {
			_ = l.modify(ln.fd, id, unix.EPOLLIN)
		}
	})
}
