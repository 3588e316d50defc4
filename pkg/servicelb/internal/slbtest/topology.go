// Package slbtest builds, for the kernel tests and benchmarks of the
// service load balancer providers, a proxy namespace whose bridge joins a
// client and echo endpoints (each in a namespace of its own, as targets
// are), and the clients that talk to services through it.
package slbtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/causeway-net/causeway/internal/testutil"
)

// Service addresses: not on any interface, routed to the proxy by the
// hosts' default routes.
var (
	ServiceIP4 = netip.MustParseAddr("10.96.0.10")
	ServiceIP6 = netip.MustParseAddr("fd96::10")
	Gateway4   = netip.MustParseAddr("10.77.0.1")
	Gateway6   = netip.MustParseAddr("fd77::1")
)

// Host is one namespace on the proxy's bridge.
type Host struct {
	Name  string
	NS    *testutil.NetNS
	Addr4 netip.Addr
	Addr6 netip.Addr
}

// Addr returns the host's address of the family of like.
func (h *Host) Addr(like netip.Addr) netip.Addr {
	if like.Is4() {
		return h.Addr4
	}
	return h.Addr6
}

// Topology is a proxy namespace with bridge br0 (10.77.0.1/24, fd77::1/64)
// and hosts on it: Client, then Endpoints.
type Topology struct {
	Proxy     *testutil.NetNS
	Client    *Host
	Endpoints []*Host
}

// New builds the topology with n endpoints; it goes away with t.
func New(t testing.TB, n int) *Topology {
	t.Helper()
	p := testutil.NewNetNS(t, "slbp")
	p.MustExec(t, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
		"net.ipv6.conf.default.accept_dad=0")
	p.MustExec(t, "ip", "link", "add", "br0", "type", "bridge")
	p.MustExec(t, "ip", "addr", "add", "10.77.0.1/24", "dev", "br0")
	p.MustExec(t, "ip", "addr", "add", "fd77::1/64", "dev", "br0", "nodad")
	p.MustExec(t, "ip", "link", "set", "br0", "up")
	topo := &Topology{Proxy: p}
	for i := 0; i <= n; i++ {
		name := fmt.Sprintf("ep%d", i)
		if i == 0 {
			name = "client"
		}
		ns := testutil.NewNetNS(t, "slbh")
		h := &Host{Name: name, NS: ns,
			Addr4: netip.AddrFrom4([4]byte{10, 77, 0, byte(10 + i)}),
			Addr6: netip.MustParseAddr(fmt.Sprintf("fd77::%x", 0x10+i))}
		port := fmt.Sprintf("v%d", i)
		p.MustExec(t, "ip", "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns.Name)
		p.MustExec(t, "ip", "link", "set", port, "master", "br0", "up")
		ns.MustExec(t, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
		ns.MustExec(t, "ip", "addr", "add", h.Addr4.String()+"/24", "dev", "eth0")
		ns.MustExec(t, "ip", "addr", "add", h.Addr6.String()+"/64", "dev", "eth0", "nodad")
		ns.MustExec(t, "ip", "link", "set", "eth0", "up")
		ns.MustExec(t, "ip", "route", "add", "default", "via", Gateway4.String())
		ns.MustExec(t, "ip", "-6", "route", "add", "default", "via", Gateway6.String())
		if i == 0 {
			topo.Client = h
		} else {
			topo.Endpoints = append(topo.Endpoints, h)
		}
	}
	return topo
}

// BridgeNetfilter hands the bridge's frames to netfilter in the proxy
// namespace, as the proxy's dataplane does for the nftables provider
// (dataplane.Options.BridgeNetfilter). It needs the br_netfilter module.
func (t *Topology) BridgeNetfilter(tb testing.TB) {
	tb.Helper()
	t.Proxy.MustExec(tb, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1", "net.bridge.bridge-nf-call-ip6tables=1")
}

// DialTCP connects from h to addr.
func (h *Host) DialTCP(ctx context.Context, addr netip.AddrPort) (*net.TCPConn, error) {
	var c net.Conn
	err := h.NS.Do(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", addr.String())
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// DialUDP returns a UDP socket of h connected to addr (it only accepts
// datagrams from addr).
func (h *Host) DialUDP(addr netip.AddrPort) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := h.NS.Do(func() (err error) {
		c, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
		return err
	})
	return c, err
}

// Greeting is what an echo endpoint says first: its name and the source
// address it sees.
type Greeting struct {
	Endpoint string
	Source   netip.Addr
}

// TCPHello connects to addr, reads the greeting and closes.
func (h *Host) TCPHello(ctx context.Context, addr netip.AddrPort) (Greeting, error) {
	return h.tcpHello(ctx, addr, false)
}

// TCPHelloAbort is TCPHello closing with a reset, which leaves no TIME_WAIT
// behind (for connection-rate loops).
func (h *Host) TCPHelloAbort(ctx context.Context, addr netip.AddrPort) (Greeting, error) {
	return h.tcpHello(ctx, addr, true)
}

func (h *Host) tcpHello(ctx context.Context, addr netip.AddrPort, abort bool) (Greeting, error) {
	c, err := h.DialTCP(ctx, addr)
	if err != nil {
		return Greeting{}, err
	}
	if abort {
		_ = c.SetLinger(0)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return Greeting{}, fmt.Errorf("read greeting: %w", err)
	}
	return parseGreeting(strings.TrimSpace(line))
}

func parseGreeting(s string) (Greeting, error) {
	name, src, ok := strings.Cut(s, " ")
	if !ok {
		return Greeting{}, fmt.Errorf("bad greeting %q", s)
	}
	src, _, _ = strings.Cut(src, " ")
	a, err := netip.ParseAddr(src)
	if err != nil {
		return Greeting{}, fmt.Errorf("bad greeting %q: %w", s, err)
	}
	return Greeting{Endpoint: name, Source: a.Unmap()}, nil
}

// UDPHello sends payload on c and returns the greeting and the echoed
// payload of the answer.
func UDPHello(c *net.UDPConn, payload []byte, timeout time.Duration) (Greeting, []byte, error) {
	if _, err := c.Write(payload); err != nil {
		return Greeting{}, nil, err
	}
	buf := make([]byte, 70000)
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	n, err := c.Read(buf)
	if err != nil {
		return Greeting{}, nil, err
	}
	name, rest, _ := strings.Cut(string(buf[:n]), " ")
	src, body, _ := strings.Cut(rest, " ")
	g, err := parseGreeting(name + " " + src)
	return g, []byte(body), err
}

// Echo is a TCP and a UDP echo server on one port in every endpoint: each
// greets with "<endpoint> <source>\n" (TCP, then echoes the stream and
// half-closes after the client's EOF) or answers "<endpoint> <source>
// <payload>" (UDP).
type Echo struct {
	Port uint16

	wg      sync.WaitGroup
	mu      sync.Mutex
	closers []io.Closer
	conns   map[net.Conn]struct{}
}

// StartEcho starts the servers on the endpoints; they stop with t.
func StartEcho(t testing.TB, hosts []*Host) *Echo {
	t.Helper()
	e := &Echo{conns: make(map[net.Conn]struct{})}
	t.Cleanup(e.Close)
	for _, h := range hosts {
		if err := e.start(h); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *Echo) start(h *Host) error {
	var l *net.TCPListener
	var u *net.UDPConn
	err := h.NS.Do(func() error {
		addr := fmt.Sprintf("[::]:%d", e.Port)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		l = ln.(*net.TCPListener)
		if e.Port == 0 {
			e.Port = uint16(l.Addr().(*net.TCPAddr).Port)
		}
		u, err = net.ListenUDP("udp", &net.UDPAddr{Port: int(e.Port)})
		if err != nil {
			_ = l.Close()
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("echo on %s: %w", h.Name, err)
	}
	e.mu.Lock()
	e.closers = append(e.closers, l, u)
	e.mu.Unlock()
	e.wg.Add(2)
	go func() {
		defer e.wg.Done()
		e.serveTCP(h.Name, l)
	}()
	go func() {
		defer e.wg.Done()
		serveUDP(h.Name, u)
	}()
	return nil
}

// StopHost closes the servers of the endpoint at index i of hosts (as
// started) so that dials to it are refused.
func (e *Echo) StopHost(i int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.closers[2*i].Close()
	_ = e.closers[2*i+1].Close()
}

func (e *Echo) serveTCP(name string, l *net.TCPListener) {
	for {
		c, err := l.AcceptTCP()
		if err != nil {
			return
		}
		e.mu.Lock()
		e.conns[c] = struct{}{}
		e.mu.Unlock()
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer func() {
				e.mu.Lock()
				delete(e.conns, c)
				e.mu.Unlock()
				_ = c.Close()
			}()
			src := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
			if _, err := fmt.Fprintf(c, "%s %s\n", name, src); err != nil {
				return
			}
			if _, err := io.Copy(c, c); err == nil {
				_ = c.CloseWrite()
			}
		}()
	}
}

func serveUDP(name string, u *net.UDPConn) {
	buf := make([]byte, 70000)
	for {
		n, from, err := u.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		msg := append([]byte(fmt.Sprintf("%s %s ", name, from.Addr().Unmap())), buf[:n]...)
		_, _ = u.WriteToUDPAddrPort(msg, from)
	}
}

// Close stops the servers and their connections and waits for them.
func (e *Echo) Close() {
	e.mu.Lock()
	for _, c := range e.closers {
		_ = c.Close()
	}
	for c := range e.conns {
		_ = c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}
