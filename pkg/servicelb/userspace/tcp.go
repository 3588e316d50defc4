package userspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/userspace/relay"
)

// keepAliveListen sets the relayed sockets' options (keepalive, no Nagle
// delay) once, on the listening socket: the kernel copies them to every
// accepted connection, where Go would otherwise set keepalive with four
// setsockopt calls per connection.
var keepAliveListen = net.ListenConfig{KeepAlive: -1, Control: setListenerKeepAlive}

func setListenerKeepAlive(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = relay.StreamOptions(int(fd)) })
	if err = errors.Join(err, serr); err != nil {
		return fmt.Errorf("listener keepalive: %w", err)
	}
	return nil
}

// tcpSocket owns its connections' goroutines: they outlive ProxyLoop
// (which returns when the listener closes) until they end or
// CloseConnections.
type tcpSocket struct {
	l    *net.TCPListener
	port int

	ctx    context.Context // cancelled by CloseConnections
	cancel context.CancelFunc
	wg     sync.WaitGroup // the connections' goroutines
	mu     sync.Mutex
	active int // the connections' goroutines (dials included)
	conns  map[*net.TCPConn]struct{}
}

func newTCPSocket(l *net.TCPListener, port int) *tcpSocket {
	ctx, cancel := context.WithCancel(context.Background())
	return &tcpSocket{l: l, port: port, ctx: ctx, cancel: cancel, conns: make(map[*net.TCPConn]struct{})}
}

func (s *tcpSocket) Addr() net.Addr  { return s.l.Addr() }
func (s *tcpSocket) ListenPort() int { return s.port }
func (s *tcpSocket) Close() error    { return s.l.Close() }

// Connections is the number of connections being relayed or dialled.
func (s *tcpSocket) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// CloseConnections aborts every relayed connection and pending dial, and
// returns once their goroutines ended. Connections accepted afterwards are
// closed at once.
func (s *tcpSocket) CloseConnections() {
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// start counts a connection's goroutine in; it reports false once
// CloseConnections began (under mu, so that no goroutine is added while
// CloseConnections waits).
func (s *tcpSocket) start() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return false
	}
	s.active++
	s.wg.Add(1)
	return true
}

func (s *tcpSocket) end() {
	s.mu.Lock()
	s.active--
	s.mu.Unlock()
	s.wg.Done()
}

// track registers the pair in, out for CloseConnections; it reports false
// (and closes both) when the socket is already shutting down.
func (s *tcpSocket) track(in, out *net.TCPConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		_ = in.Close()
		_ = out.Close()
		return false
	}
	s.conns[in] = struct{}{}
	s.conns[out] = struct{}{}
	return true
}

func (s *tcpSocket) untrack(in, out *net.TCPConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, in)
	delete(s.conns, out)
}

// ProxyLoop accepts until Close and returns then, as the reference's loop
// does: the connections in flight go on, owned by the socket, until they
// end or CloseConnections. Each connection is dialled and relayed in its
// own goroutine, so a slow endpoint never delays the next client. An
// accept error (even "too many open files") is reported and the loop goes
// on after a short pause.
func (s *tcpSocket) ProxyLoop(svc servicelb.ServicePortName, info *ServiceInfo, lb servicelb.LoadBalancer) {
	for {
		c, err := s.l.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			info.record(servicelb.EventReadError, netip.AddrPort{}, netip.AddrPort{}, err)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if !s.start() {
			_ = c.Close()
			continue
		}
		go func() {
			defer s.end()
			s.serve(c, svc, info, lb)
		}()
	}
}

// serve dials an endpoint for in and relays between them. A pending dial
// is aborted through s.ctx, so in needs no tracking before it succeeds.
func (s *tcpSocket) serve(in *net.TCPConn, svc servicelb.ServicePortName, info *ServiceInfo, lb servicelb.LoadBalancer) {
	c, _, err := TryConnectEndpoints(s.ctx, svc, clientOf(in.RemoteAddr()), "tcp", info, lb)
	if err != nil {
		info.Log.Debug("no endpoint for connection", "service", svc.String(), "client", in.RemoteAddr().String(), "error", err)
		_ = in.Close()
		return
	}
	out, ok := c.(*net.TCPConn)
	if !ok {
		_ = c.Close()
		_ = in.Close()
		return
	}
	if !s.track(in, out) {
		return
	}
	defer s.untrack(in, out)
	ProxyTCP(in, out)
}

// ProxyTCP relays in and out both ways until both directions ended, then
// closes them. Each direction is an io.Copy between two *net.TCPConn, which
// the runtime turns into splice(2) through a kernel pipe: the bytes never
// enter user space. An EOF is passed on as a half-close (CloseWrite), so a
// client that shuts down its sending side still gets the whole answer; an
// error (a reset from either side) aborts both connections with a reset, so
// nothing is left blocked.
func ProxyTCP(in, out *net.TCPConn) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		copyHalf(out, in)
	}()
	copyHalf(in, out)
	wg.Wait()
	_ = in.Close()
	_ = out.Close()
}

func copyHalf(dst, src *net.TCPConn) {
	if _, err := io.Copy(dst, src); err != nil {
		// Pass the failure on as a reset (and leave no TIME_WAIT behind).
		_ = dst.SetLinger(0)
		_ = src.SetLinger(0)
		_ = dst.Close()
		_ = src.Close()
		return
	}
	_ = dst.CloseWrite()
}
