package userspace

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/slbtest"
)

// TestNewProxierRefusesLoopback: every loopback listen IP is refused, not
// only 127.0.0.1 and ::1 as in the reference (TestLoopbackListenIPUnreachable
// shows why); other addresses are taken.
func TestNewProxierRefusesLoopback(t *testing.T) {
	for _, ip := range []string{"127.0.0.1", "::1", "127.0.0.2", "127.255.255.254", "::ffff:127.0.0.1"} {
		_, err := NewProxier(servicelb.NewLoadBalancerRR(), netip.MustParseAddr(ip), servicelb.PortRange{}, time.Minute,
			Options{NoRedirect: true})
		require.ErrorIs(t, err, ErrProxyOnLocalhost, ip)
		_, err = NewCustomProxier(servicelb.NewLoadBalancerRR(), netip.MustParseAddr(ip), servicelb.PortRange{}, time.Minute,
			Options{NoRedirect: true}, NewProxySocket)
		require.ErrorIs(t, err, ErrProxyOnLocalhost, ip)
	}
	for _, ip := range []string{"10.0.0.1", "fd00::1", "::"} {
		p, err := NewProxier(servicelb.NewLoadBalancerRR(), netip.MustParseAddr(ip), servicelb.PortRange{}, time.Minute,
			Options{NoRedirect: true})
		require.NoError(t, err, ip)
		require.NoError(t, p.Close())
	}
}

// TestLoopbackListenIPUnreachable: routed clients cannot reach a socket on
// any loopback address through the redirect rules (the kernel drops a
// routed packet whose destination became a loopback address), 127.0.0.2 no
// more than 127.0.0.1: hence ErrProxyOnLocalhost for all of 127.0.0.0/8.
// The rules are written for such a listen IP past the refusal.
func TestLoopbackListenIPUnreachable(t *testing.T) {
	topo := slbtest.New(t, 0)
	for _, ip := range []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), slbtest.Gateway4} {
		var l net.Listener
		require.NoError(t, topo.Proxy.Do(func() (err error) {
			l, err = net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
			return err
		}))
		p := &Proxier{listenIP: ip, opts: Options{NetNS: topo.Proxy.Handle}}
		svc := netip.AddrPortFrom(slbtest.ServiceIP4, 80)
		require.NoError(t, p.writeRules([]redirect{{svc: svc, proto: servicelb.TCP, port: clientOf(l.Addr()).Port()}}))
		// The kernel drops the SYNs: the dial can only time out. The
		// control has all the time it may need.
		wait := time.Second
		if ip == slbtest.Gateway4 {
			wait = closeGuard
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		c, err := topo.Client.DialTCP(ctx, svc)
		cancel()
		if ip == slbtest.Gateway4 {
			require.NoError(t, err, "the control: a socket on the bridge address is reached")
			_ = c.Close()
		} else {
			require.Error(t, err, "a routed client reached a socket on %s", ip)
		}
		_ = l.Close()
		require.NoError(t, p.CleanupLeftovers())
	}
}

// newTestProxier returns a proxier in topo's proxy namespace, closed (and
// checked clean) with t.
func newTestProxier(t *testing.T, topo *slbtest.Topology, opts Options) (*Proxier, *servicelb.LogRecorder) {
	t.Helper()
	rec := servicelb.NewLogRecorder(slbtest.Logger())
	opts.NetNS = topo.Proxy.Handle
	opts.Logger = slbtest.Logger()
	opts.Recorder = rec
	p, err := NewProxier(servicelb.NewLoadBalancerRR(), netip.Addr{}, servicelb.PortRange{}, time.Minute, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.False(t, topo.TableExists(t, TableName), "table left behind after Close")
	})
	return p, rec
}

func subject(t *testing.T, topo *slbtest.Topology, opts Options) (*slbtest.Subject, *Proxier) {
	p, rec := newTestProxier(t, topo, opts)
	dialFailures := func() uint64 { return rec.Count(slbtest.Ref, servicelb.EventDialFailed) }
	return &slbtest.Subject{Topo: topo, Provider: p, SyncNow: p.SyncNow, Table: TableName, DialFailures: dialFailures, Removed: func(t *testing.T, svc servicelb.ServicePortInfo) {
		assert.Zero(t, p.Port(svc.Name), "socket of the removed service still open")
		assert.Nil(t, p.Info(svc.Name))
		p.syncMu.Lock()
		defer p.syncMu.Unlock()
		assert.Empty(t, p.applied, "redirect rules of the removed service remain")
	}}, p
}

func TestUserspaceScenarios(t *testing.T) {
	topo := slbtest.New(t, 3)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	slbtest.RunScenarios(t, topo, echo, func(t *testing.T) *slbtest.Subject {
		s, _ := subject(t, topo, Options{})
		return s
	})
}

func TestUserspaceUDP(t *testing.T) {
	topo := slbtest.New(t, 3)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	svc := netip.AddrPortFrom(slbtest.ServiceIP4, 53)
	cfg := slbtest.Config{IP: svc.Addr(), Port: svc.Port(), Protocol: servicelb.UDP, Hosts: topo.Endpoints, EPPort: echo.Port}

	t.Run("idle timeout ends the flow", func(t *testing.T) {
		s, p := subject(t, topo, Options{UDPIdleTimeout: 300 * time.Millisecond})
		s.Apply(t, cfg)
		c, err := topo.Client.DialUDP(svc)
		require.NoError(t, err)
		defer c.Close()
		start := time.Now()
		_, _, err = slbtest.UDPHello(c, []byte("x"), 2*time.Second)
		require.NoError(t, err)
		clients := p.Info(slbtest.SvcName).ActiveClients
		require.Equal(t, 1, clients.Len())
		require.Eventually(t, func() bool { return clients.Len() == 0 }, time.Minute, 10*time.Millisecond)
		t.Logf("FIGURE: UDP flow reaped %v after its last datagram (idle timeout 300ms)", time.Since(start))
	})
	t.Run("64 KiB datagrams pass whole", func(t *testing.T) {
		for _, ip := range []netip.Addr{slbtest.ServiceIP4, slbtest.ServiceIP6} {
			s, _ := subject(t, topo, Options{})
			c := cfg
			c.IP = ip
			s.Apply(t, c)
			conn, err := topo.Client.DialUDP(netip.AddrPortFrom(ip, svc.Port()))
			require.NoError(t, err)
			payload := make([]byte, 65000)
			for i := range payload {
				payload[i] = byte(i * 7)
			}
			_, got, err := slbtest.UDPHello(conn, payload, 3*time.Second)
			_ = conn.Close()
			require.NoError(t, err)
			require.Equal(t, payload, got, "datagram over %s truncated or changed", ip)
		}
	})
	t.Run("client sockets are bounded and counted", func(t *testing.T) {
		s, p := subject(t, topo, Options{MaxUDPClients: 2})
		s.Apply(t, cfg)
		for i := range 3 {
			c, err := topo.Client.DialUDP(svc)
			require.NoError(t, err)
			defer c.Close()
			// An answer may take long on a busy machine; the refused
			// third flow is waited for a second only.
			wait := map[bool]time.Duration{true: 10 * time.Second, false: time.Second}[i < 2]
			_, _, err = slbtest.UDPHello(c, []byte("x"), wait)
			if i < 2 {
				require.NoError(t, err)
			} else {
				require.True(t, slbtest.IsTimeout(err), "third flow answered: %v", err)
			}
		}
		info := p.Info(slbtest.SvcName)
		require.Equal(t, 2, info.ActiveClients.Len())
		require.Equal(t, uint64(1), info.ActiveClients.Refused())
	})
}

func TestUserspaceDialFailover(t *testing.T) {
	topo := slbtest.New(t, 3)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	s, p := subject(t, topo, Options{})
	_ = p
	echo.StopHost(0) // ep1 refuses
	svc := netip.AddrPortFrom(slbtest.ServiceIP4, 80)
	s.Apply(t, slbtest.Config{IP: svc.Addr(), Port: svc.Port(), Protocol: servicelb.TCP, Hosts: topo.Endpoints, EPPort: echo.Port})
	got := map[string]int{}
	for range 9 {
		g, err := s.Hello(t, servicelb.TCP, svc)
		require.NoError(t, err, "a refused dial must move on to the next endpoint")
		got[g.Endpoint]++
	}
	require.Zero(t, got["ep1"])
	require.Equal(t, 9, got["ep2"]+got["ep3"])
}

func TestUserspaceEvents(t *testing.T) {
	topo := slbtest.New(t, 1)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	s, p := subject(t, topo, Options{})
	rec := p.opts.Recorder.(*servicelb.LogRecorder)
	svc := netip.AddrPortFrom(slbtest.ServiceIP4, 80)
	cfg := slbtest.Config{IP: svc.Addr(), Port: svc.Port(), Protocol: servicelb.TCP, Hosts: topo.Endpoints, EPPort: echo.Port}
	s.Apply(t, cfg)
	_, err := s.Hello(t, servicelb.TCP, svc)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rec.Count(slbtest.Ref, servicelb.EventEndpointChosen) == 1 }, time.Minute, 5*time.Millisecond)
	// On a busy machine a dial to the live endpoint may time out before
	// it is answered and be retried: the failures of the connection
	// below are counted from here.
	failedBefore := rec.Count(slbtest.Ref, servicelb.EventDialFailed)
	echo.StopHost(0)
	_, err = s.Hello(t, servicelb.TCP, svc)
	require.Error(t, err)
	// Each attempt fails, refused or timed out, and is recorded once.
	require.Eventually(t, func() bool {
		return rec.Count(slbtest.Ref, servicelb.EventDialFailed)-failedBefore == uint64(len(dialTimeouts))
	}, time.Minute, 5*time.Millisecond)
	require.Equal(t, uint64(1), rec.Count(slbtest.Ref, servicelb.EventEndpointChosen), "an endpoint chosen while none answers")
	cfg.Hosts = nil
	s.Apply(t, cfg)
	_, err = s.Hello(t, servicelb.TCP, svc)
	require.Error(t, err)
	require.Eventually(t, func() bool { return rec.Count(slbtest.Ref, servicelb.EventNoEndpoints) == 1 }, time.Minute, 5*time.Millisecond)
}

func TestSyncLoop(t *testing.T) {
	topo := slbtest.New(t, 1)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	p, _ := newTestProxier(t, topo, Options{MinSyncPeriod: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.SyncLoop(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	svc := netip.AddrPortFrom(slbtest.ServiceIP4, 80)
	s := &slbtest.Subject{Topo: topo, Provider: p, SyncNow: func() error { return nil }}
	s.Apply(t, slbtest.Config{IP: svc.Addr(), Port: svc.Port(), Protocol: servicelb.TCP, Hosts: topo.Endpoints, EPPort: echo.Port})
	require.Eventually(t, func() bool {
		_, err := s.Hello(t, servicelb.TCP, svc)
		return err == nil
	}, time.Minute, 20*time.Millisecond, "SyncLoop never wrote the rules")
}

// countingSocket is a ProxySocket written outside the default constructor:
// it wraps the default one and counts its loops.
type countingSocket struct {
	ProxySocket
	loops *atomic.Int32
}

func (s countingSocket) ProxyLoop(svc servicelb.ServicePortName, info *ServiceInfo, lb servicelb.LoadBalancer) {
	s.loops.Add(1)
	s.ProxySocket.ProxyLoop(svc, info, lb)
}

func TestNewCustomProxier(t *testing.T) {
	topo := slbtest.New(t, 1)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	var loops atomic.Int32
	makeSocket := func(proto servicelb.Protocol, ip netip.Addr, port int) (ProxySocket, error) {
		s, err := NewProxySocket(proto, ip, port)
		if err != nil {
			return nil, err
		}
		return countingSocket{ProxySocket: s, loops: &loops}, nil
	}
	p, err := NewCustomProxier(servicelb.NewLoadBalancerRR(), netip.Addr{}, servicelb.PortRange{}, time.Minute,
		Options{NetNS: topo.Proxy.Handle, Logger: slbtest.Logger()}, makeSocket)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	s := &slbtest.Subject{Topo: topo, Provider: p, SyncNow: p.SyncNow}
	svc := netip.AddrPortFrom(slbtest.ServiceIP6, 80)
	s.Apply(t, slbtest.Config{IP: svc.Addr(), Port: svc.Port(), Protocol: servicelb.TCP, Hosts: topo.Endpoints, EPPort: echo.Port})
	g, err := s.Hello(t, servicelb.TCP, svc)
	require.NoError(t, err)
	require.Equal(t, "ep1", g.Endpoint)
	require.Equal(t, int32(1), loops.Load())
}

func TestPortRange(t *testing.T) {
	topo := slbtest.New(t, 1)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	// Pick some port (the fresh proxy namespace has none in use) and
	// confine the proxier to it.
	probe, err := NewProxySocket(servicelb.TCP, netip.Addr{}, 0)
	require.NoError(t, err)
	port := int(clientOf(probe.Addr()).Port())
	require.NoError(t, probe.Close())
	p, err := NewProxier(servicelb.NewLoadBalancerRR(), netip.Addr{}, servicelb.PortRange{Base: port, Size: 1}, time.Minute,
		Options{NetNS: topo.Proxy.Handle, Logger: slbtest.Logger()})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	s := &slbtest.Subject{Topo: topo, Provider: p, SyncNow: p.SyncNow}
	cfg := slbtest.Config{IP: slbtest.ServiceIP4, Port: 80, Protocol: servicelb.TCP, Hosts: topo.Endpoints, EPPort: echo.Port}
	s.Apply(t, cfg)
	require.Equal(t, uint16(port), p.Port(slbtest.SvcName), "socket on the range's only port")
	// A second service port finds the range exhausted and is not served;
	// the first keeps working.
	p.OnServiceUpdate([]servicelb.Service{{Ref: slbtest.Ref, IP: slbtest.ServiceIP4, Ports: []servicelb.ServicePort{
		{Name: "p", Port: 80, Protocol: servicelb.TCP}, {Name: "q", Port: 81, Protocol: servicelb.TCP}}}})
	require.NoError(t, p.SyncNow())
	require.Zero(t, p.Port(servicelb.ServicePortName{Namespace: slbtest.Ref.Namespace, Name: slbtest.Ref.Name, Port: "q"}))
	_, err = s.Hello(t, servicelb.TCP, netip.AddrPortFrom(slbtest.ServiceIP4, 80))
	require.NoError(t, err)
}

// TestSpecificListenIP: sockets bound to one address are reached by DNAT to
// it; a service of the other family is not served.
func TestSpecificListenIP(t *testing.T) {
	topo := slbtest.New(t, 1)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	p, err := NewProxier(servicelb.NewLoadBalancerRR(), slbtest.Gateway4, servicelb.PortRange{}, time.Minute,
		Options{NetNS: topo.Proxy.Handle, Logger: slbtest.Logger()})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	s := &slbtest.Subject{Topo: topo, Provider: p, SyncNow: p.SyncNow}
	for _, proto := range []servicelb.Protocol{servicelb.TCP, servicelb.UDP} {
		s.Apply(t, slbtest.Config{IP: slbtest.ServiceIP4, Port: 80, Protocol: proto, Hosts: topo.Endpoints, EPPort: echo.Port})
		require.Equal(t, slbtest.Gateway4, p.socketAddr(slbtest.SvcName).Addr(), "socket bound to the listen IP")
		_, err = s.Hello(t, proto, netip.AddrPortFrom(slbtest.ServiceIP4, 80))
		require.NoError(t, err, proto)
	}
	s.Apply(t, slbtest.Config{IP: slbtest.ServiceIP6, Port: 80, Protocol: servicelb.TCP, Hosts: topo.Endpoints, EPPort: echo.Port})
	require.Nil(t, p.Info(slbtest.SvcName), "IPv6 service on an IPv4 listen IP")
}

// TestPortStates: each service port with its endpoints, socket port and
// UDP flows.
func TestPortStates(t *testing.T) {
	topo := slbtest.New(t, 3)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	s, p := subject(t, topo, Options{})
	s.Apply(t, slbtest.Config{IP: slbtest.ServiceIP6, Port: 53, Protocol: servicelb.UDP, Hosts: topo.Endpoints, EPPort: echo.Port})
	_, err := s.Hello(t, servicelb.UDP, netip.AddrPortFrom(slbtest.ServiceIP6, 53))
	require.NoError(t, err)
	st := p.PortStates()
	require.Len(t, st, 1)
	assert.Equal(t, netip.AddrPortFrom(slbtest.ServiceIP6, 53), st[0].Addr)
	assert.Len(t, st[0].Endpoints, 3)
	assert.Equal(t, p.Port(slbtest.SvcName), st[0].ProxyPort)
	assert.Equal(t, 1, st[0].UDPClients, "the flow of the hello")
}

// TestPortStatesCountTCPConnections: a TCP service port shows the
// connections its relay holds, and none once they ended.
func TestPortStatesCountTCPConnections(t *testing.T) {
	topo := slbtest.New(t, 1)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	s, p := subject(t, topo, Options{})
	s.Apply(t, slbtest.Config{IP: slbtest.ServiceIP4, Port: 80, Protocol: servicelb.TCP, Hosts: topo.Endpoints, EPPort: echo.Port})
	conns := func() int {
		st := p.PortStates()
		require.Len(t, st, 1)
		return st[0].TCPConnections
	}
	c, err := topo.Client.DialTCP(context.Background(), netip.AddrPortFrom(slbtest.ServiceIP4, 80))
	require.NoError(t, err)
	_, err = bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err, "greeting through the relay")
	assert.Equal(t, 1, conns())
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool { return conns() == 0 }, time.Minute, 10*time.Millisecond)
}

// closeGuard is far above any Close seen: it only tells "returned" from
// "blocked".
const closeGuard = 30 * time.Second

// closeNow runs p.Close and fails t if it does not return within
// closeGuard; it reports how long it took.
func closeNow(t *testing.T, p *Proxier, what string) {
	t.Helper()
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(closeGuard):
		t.Fatalf("Close still blocked after %v: %s", closeGuard, what)
	}
	t.Logf("FIGURE: Close returned in %v (%s)", time.Since(start), what)
}

// proxierKind makes a proxier in a topology's proxy namespace.
type proxierKind struct {
	name string
	new  func() (*Proxier, error)
}

// proxierKinds are a proxier on the relay loop's sockets (NewProxier) and
// one on the portable ones.
func proxierKinds(topo *slbtest.Topology) []proxierKind {
	opts := Options{NetNS: topo.Proxy.Handle, Logger: slbtest.Logger()}
	return []proxierKind{
		{"relay", func() (*Proxier, error) {
			return NewProxier(servicelb.NewLoadBalancerRR(), netip.Addr{}, servicelb.PortRange{}, time.Minute, opts)
		}},
		{"portable", func() (*Proxier, error) {
			return NewCustomProxier(servicelb.NewLoadBalancerRR(), netip.Addr{}, servicelb.PortRange{}, time.Minute, opts, NewProxySocket)
		}},
	}
}

// serveOne makes a proxier of kind and serves on it the service port svc,
// proto, on the echo endpoints; the proxier is closed (again) with t.
func serveOne(t *testing.T, kind proxierKind, topo *slbtest.Topology, echo *slbtest.Echo, svc netip.AddrPort,
	proto servicelb.Protocol) (*Proxier, *slbtest.Subject, slbtest.Config) {
	t.Helper()
	p, err := kind.new()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	s := &slbtest.Subject{Topo: topo, Provider: p, SyncNow: p.SyncNow}
	cfg := slbtest.Config{IP: svc.Addr(), Port: svc.Port(), Protocol: proto, Hosts: topo.Endpoints, EPPort: echo.Port}
	s.Apply(t, cfg)
	return p, s, cfg
}

// TestCloseWithRemovedPortConnection: a service port removed while one of
// its TCP connections stays open keeps relaying it, as the reference does;
// the proxier's Close returns at once all the same and resets it. A removed
// UDP port's flows end with its socket, leaving Close nothing to wait for.
// Both the relay loop's sockets (NewProxier) and the portable ones.
func TestCloseWithRemovedPortConnection(t *testing.T) {
	topo := slbtest.New(t, 1)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	for _, kind := range proxierKinds(topo) {
		t.Run(kind.name+"/TCP", func(t *testing.T) {
			svc := netip.AddrPortFrom(slbtest.ServiceIP4, 80)
			p, s, cfg := serveOne(t, kind, topo, echo, svc, servicelb.TCP)
			c, err := topo.Client.DialTCP(context.Background(), svc)
			require.NoError(t, err)
			defer c.Close() // lets a blocked Close go on when the test failed
			r := bufio.NewReader(c)
			_ = c.SetDeadline(time.Now().Add(closeGuard))
			_, err = r.ReadString('\n')
			require.NoError(t, err, "greeting")

			cfg.Port = 0
			s.Apply(t, cfg)
			require.Zero(t, p.Port(slbtest.SvcName), "service port removed")
			_, err = c.Write([]byte("still here\n"))
			require.NoError(t, err)
			line, err := r.ReadString('\n')
			require.NoError(t, err, "the removed port's connection is relayed on")
			require.Equal(t, "still here\n", line)

			closeNow(t, p, "a removed TCP port's connection open")
			_, err = r.ReadString('\n')
			require.Error(t, err, "Close left the connection open")
			require.False(t, slbtest.IsTimeout(err), "Close left the connection open")
		})
		t.Run(kind.name+"/UDP", func(t *testing.T) {
			svc := netip.AddrPortFrom(slbtest.ServiceIP4, 53)
			p, s, cfg := serveOne(t, kind, topo, echo, svc, servicelb.UDP)
			flow, err := topo.Client.DialUDP(svc)
			require.NoError(t, err)
			defer flow.Close()
			_, _, err = slbtest.UDPHello(flow, []byte("x"), 2*time.Second)
			require.NoError(t, err)
			info := p.Info(slbtest.SvcName)
			cfg.Port = 0
			s.Apply(t, cfg)
			require.Zero(t, info.ActiveClients.Len(), "the removed port's flow outlived its socket")
			closeNow(t, p, "a removed UDP port's client still there")
		})
	}
}

// TestRetiredSocketForgotten: the proxier keeps a removed TCP port's socket
// while a connection of it goes on, and forgets it at the sync after the
// connection ended.
func TestRetiredSocketForgotten(t *testing.T) {
	topo := slbtest.New(t, 1)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	for _, kind := range proxierKinds(topo) {
		t.Run(kind.name, func(t *testing.T) {
			svc := netip.AddrPortFrom(slbtest.ServiceIP6, 80)
			p, s, cfg := serveOne(t, kind, topo, echo, svc, servicelb.TCP)
			retired := func() int {
				require.NoError(t, p.SyncNow())
				p.mu.Lock()
				defer p.mu.Unlock()
				return len(p.retired)
			}
			c, err := topo.Client.DialTCP(context.Background(), svc)
			require.NoError(t, err)
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(closeGuard))
			_, err = bufio.NewReader(c).ReadString('\n')
			require.NoError(t, err, "greeting")
			cfg.Port = 0
			s.Apply(t, cfg)
			require.Equal(t, 1, retired(), "the socket of the connection in flight")
			require.NoError(t, c.Close())
			require.Eventually(t, func() bool { return retired() == 0 }, closeGuard, 10*time.Millisecond)
		})
	}
}
