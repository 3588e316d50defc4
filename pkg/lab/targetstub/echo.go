package targetstub

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/causeway-net/causeway/internal/netnsdo"
	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// echoServer answers on every VIP: TCP with "<name>\n" at once and then an
// echo of whatever the peer sends; UDP with "<name>\n" for every datagram.
type echoServer struct {
	name      string
	listeners []net.Listener
	conns     []net.PacketConn
	wg        sync.WaitGroup

	mu     sync.Mutex
	active map[net.Conn]struct{}
	closed bool
}

// startEcho opens the sockets inside the namespace at netnsPath (current when
// empty) on every address of listen (the unspecified IPv6 address: every
// address of both families) and serves them until stop.
func startEcho(netnsPath, name string, listen []netip.AddrPort) (*echoServer, error) {
	e := &echoServer{name: name, active: map[net.Conn]struct{}{}}
	lc := net.ListenConfig{Control: traffic.Freebind}
	err := netnsdo.DoPath(netnsPath, func() error {
		for _, ap := range listen {
			addr := ap.String()
			tcp, udp := "tcp4", "udp4"
			switch {
			case ap.Addr().IsUnspecified():
				tcp, udp = "tcp", "udp"
			case ap.Addr().Is6():
				tcp, udp = "tcp6", "udp6"
			}
			l, err := lc.Listen(context.Background(), tcp, addr)
			if err != nil {
				return fmt.Errorf("listen %s %s: %w", tcp, addr, err)
			}
			e.listeners = append(e.listeners, l)
			pc, err := lc.ListenPacket(context.Background(), udp, addr)
			if err != nil {
				return fmt.Errorf("listen %s %s: %w", udp, addr, err)
			}
			e.conns = append(e.conns, pc)
		}
		return nil
	})
	if err != nil {
		e.stop()
		return nil, err
	}
	for _, l := range e.listeners {
		e.wg.Add(1)
		go e.serveTCP(l)
	}
	for _, pc := range e.conns {
		e.wg.Add(1)
		go e.serveUDP(pc)
	}
	return e, nil
}

func (e *echoServer) serveTCP(l net.Listener) {
	defer e.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				slog.Warn("echo accept", "error", err)
			}
			return
		}
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			_ = c.Close()
			return
		}
		e.active[c] = struct{}{}
		e.mu.Unlock()
		e.wg.Add(1)
		go e.handleTCP(c)
	}
}

func (e *echoServer) handleTCP(c net.Conn) {
	defer e.wg.Done()
	defer func() {
		e.mu.Lock()
		delete(e.active, c)
		e.mu.Unlock()
		_ = c.Close()
	}()
	if _, err := c.Write([]byte(e.name + "\n")); err != nil {
		return
	}
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if _, werr := c.Write(line); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (e *echoServer) serveUDP(pc net.PacketConn) {
	defer e.wg.Done()
	buf := make([]byte, 2048)
	reply := []byte(e.name + "\n")
	for {
		_, from, err := pc.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				slog.Warn("echo udp read", "error", err)
			}
			return
		}
		if _, err := pc.WriteTo(reply, from); err != nil {
			slog.Debug("echo udp reply", "to", from, "error", err)
		}
	}
}

// stop closes every socket and waits for the goroutines.
func (e *echoServer) stop() {
	e.mu.Lock()
	e.closed = true
	for c := range e.active {
		_ = c.Close()
	}
	e.mu.Unlock()
	for _, l := range e.listeners {
		_ = l.Close()
	}
	for _, pc := range e.conns {
		_ = pc.Close()
	}
	e.wg.Wait()
}
