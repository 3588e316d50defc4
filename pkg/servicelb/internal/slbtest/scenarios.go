package slbtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/require"
	"github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/kernel"
)

// Subject is a provider under test in a topology.
type Subject struct {
	Topo     *Topology
	Provider servicelb.Provider
	// SyncNow reconciles synchronously.
	SyncNow func() error
	// Removed checks what a provider must leave behind a removed service
	// port (sockets closed, rules gone).
	Removed func(t *testing.T, svc servicelb.ServicePortInfo)
	// Table is the provider's nftables table.
	Table string
	// DialFailures counts the dials to endpoints that failed (nil: the
	// provider does not dial). Each one moves its connection to the next
	// endpoint, which a round robin must allow for.
	DialFailures func() uint64
}

// helloPinned says hello to addr and requires the answer from pinned,
// unless a dial failed meanwhile (it moves the client on: the new endpoint
// is then the pinned one). It returns the endpoint that answered.
func (s *Subject) helloPinned(t *testing.T, proto servicelb.Protocol, addr netip.AddrPort, pinned, msg string) string {
	t.Helper()
	before := s.dialFailures()
	g, err := s.Hello(t, proto, addr)
	require.NoError(t, err)
	if s.dialFailures() == before {
		require.Equal(t, pinned, g.Endpoint, msg)
	}
	return g.Endpoint
}

// dialFailures is s.DialFailures, 0 for a provider that does not dial.
func (s *Subject) dialFailures() int {
	if s.DialFailures == nil {
		return 0
	}
	return int(s.DialFailures())
}

// Logger is the providers' logger in tests (debug with SLB_DEBUG set).
func Logger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("SLB_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// TableExists reports whether the proxy namespace has the inet table name.
func (topo *Topology) TableExists(t testing.TB, name string) bool {
	t.Helper()
	ok, err := kernel.TableExists(topo.Proxy.Handle, name)
	require.NoError(t, err)
	return ok
}

// without returns hosts but the one named name.
func without(hosts []*Host, name string) []*Host {
	var out []*Host
	for _, h := range hosts {
		if h.Name != name {
			out = append(out, h)
		}
	}
	return out
}

// Ref is the reference the test services carry.
var Ref = servicelb.Reference{Namespace: "test", Name: "echo", UID: "uid-1"}

// SvcName is the service port the scenarios use.
var SvcName = servicelb.ServicePortName{Namespace: Ref.Namespace, Name: Ref.Name, Port: "p"}

// Config is one service with one port and its endpoints.
type Config struct {
	IP       netip.Addr
	Port     uint16
	Protocol servicelb.Protocol
	Affinity servicelb.AffinityType
	Timeout  time.Duration
	Hosts    []*Host
	EPPort   uint16
}

// Apply hands c to s's provider and syncs.
func (s *Subject) Apply(t testing.TB, c Config) {
	t.Helper()
	var svcs []servicelb.Service
	if c.Port != 0 {
		svcs = []servicelb.Service{{Ref: Ref, IP: c.IP, Affinity: c.Affinity, AffinityTimeout: c.Timeout,
			Ports: []servicelb.ServicePort{{Name: SvcName.Port, Port: c.Port, Protocol: c.Protocol}}}}
	}
	var addrs []netip.AddrPort
	for _, h := range c.Hosts {
		addrs = append(addrs, netip.AddrPortFrom(h.Addr(c.IP), c.EPPort))
	}
	eps := []servicelb.Endpoints{{Namespace: Ref.Namespace, Name: Ref.Name,
		Ports: []servicelb.EndpointPort{{Name: SvcName.Port, Addresses: addrs}}}}
	s.Provider.OnEndpointsUpdate(eps)
	s.Provider.OnServiceUpdate(svcs)
	require.NoError(t, s.SyncNow())
}

// Hello opens one connection (TCP) or flow (UDP, a new socket) from the
// client to addr and returns the greeting.
func (s *Subject) Hello(t testing.TB, proto servicelb.Protocol, addr netip.AddrPort) (Greeting, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if proto == servicelb.TCP {
		return s.Topo.Client.TCPHello(ctx, addr)
	}
	c, err := s.Topo.Client.DialUDP(addr)
	if err != nil {
		return Greeting{}, err
	}
	defer c.Close()
	g, _, err := UDPHello(c, []byte("hi"), 2*time.Second)
	return g, err
}

func families() []netip.Addr { return []netip.Addr{ServiceIP4, ServiceIP6} }

var protocols = []servicelb.Protocol{servicelb.TCP, servicelb.UDP}

// forEach runs fn for both families and both protocols.
func forEach(t *testing.T, fn func(t *testing.T, ip netip.Addr, proto servicelb.Protocol)) {
	for _, ip := range families() {
		for _, proto := range protocols {
			t.Run(fmt.Sprintf("%s/%s", proto, map[bool]string{true: "v4", false: "v6"}[ip.Is4()]), func(t *testing.T) {
				fn(t, ip, proto)
			})
		}
	}
}

// RunScenarios runs the scenarios every provider must pass; newSubject
// builds a fresh provider in topo (closed with t).
func RunScenarios(t *testing.T, topo *Topology, echo *Echo, newSubject func(t *testing.T) *Subject) {
	eps := topo.Endpoints
	t.Run("distribution", func(t *testing.T) {
		forEach(t, func(t *testing.T, ip netip.Addr, proto servicelb.Protocol) {
			s := newSubject(t)
			s.Apply(t, Config{IP: ip, Port: 80, Protocol: proto, Hosts: eps, EPPort: echo.Port})
			got := map[string]int{}
			for range 10 * len(eps) {
				var g Greeting
				var err error
				if proto == servicelb.TCP {
					g, err = s.Hello(t, proto, netip.AddrPortFrom(ip, 80))
				} else {
					// Each flow keeps its socket until the end: a closed
					// one's port could come back and rejoin its old flow.
					var c *net.UDPConn
					c, err = s.Topo.Client.DialUDP(netip.AddrPortFrom(ip, 80))
					require.NoError(t, err)
					defer c.Close()
					g, _, err = UDPHello(c, []byte("hi"), 2*time.Second)
				}
				require.NoError(t, err)
				got[g.Endpoint]++
			}
			// Ten each, but for the connections a failed dial (a
			// timeout on a busy machine) moved to the next endpoint.
			moved := s.dialFailures()
			total := 0
			for _, h := range eps {
				require.InDelta(t, 10, got[h.Name], float64(moved), "round robin over the endpoints: %v, %d moved", got, moved)
				total += got[h.Name]
			}
			require.Equal(t, 10*len(eps), total, "only the endpoints answer: %v", got)
		})
	})
	t.Run("affinity", func(t *testing.T) {
		forEach(t, func(t *testing.T, ip netip.Addr, proto servicelb.Protocol) {
			s := newSubject(t)
			s.Apply(t, Config{IP: ip, Port: 80, Protocol: proto, Affinity: servicelb.AffinityClientIP,
				Timeout: time.Hour, Hosts: eps, EPPort: echo.Port})
			addr := netip.AddrPortFrom(ip, 80)
			first, err := s.Hello(t, proto, addr)
			require.NoError(t, err)
			pinned := first.Endpoint
			for range 8 {
				pinned = s.helloPinned(t, proto, addr, pinned, "ClientIP affinity")
			}
			// Reordering the endpoints keeps the client where it is.
			rev := []*Host{eps[2], eps[0], eps[1]}
			s.Apply(t, Config{IP: ip, Port: 80, Protocol: proto, Affinity: servicelb.AffinityClientIP,
				Timeout: time.Hour, Hosts: rev, EPPort: echo.Port})
			pinned = s.helloPinned(t, proto, addr, pinned, "affinity survives a reorder")
			// Its endpoint going ends it.
			rest := without(eps, pinned)
			s.Apply(t, Config{IP: ip, Port: 80, Protocol: proto, Affinity: servicelb.AffinityClientIP,
				Timeout: time.Hour, Hosts: rest, EPPort: echo.Port})
			moved, err := s.Hello(t, proto, addr)
			require.NoError(t, err)
			require.NotEqual(t, pinned, moved.Endpoint)
			pinned = moved.Endpoint
			for range 4 {
				pinned = s.helloPinned(t, proto, addr, pinned, "pinned again")
			}
		})
	})
	t.Run("endpoint removed mid-stream", func(t *testing.T) {
		for _, ip := range families() {
			t.Run("TCP/"+ip.String(), func(t *testing.T) { endpointRemovedTCP(t, newSubject(t), ip, echo) })
			t.Run("UDP/"+ip.String(), func(t *testing.T) { endpointRemovedUDP(t, newSubject(t), ip, echo) })
		}
	})
	t.Run("service port change", func(t *testing.T) {
		forEach(t, func(t *testing.T, ip netip.Addr, proto servicelb.Protocol) {
			s := newSubject(t)
			s.Apply(t, Config{IP: ip, Port: 80, Protocol: proto, Hosts: eps, EPPort: echo.Port})
			_, err := s.Hello(t, proto, netip.AddrPortFrom(ip, 80))
			require.NoError(t, err)
			s.Apply(t, Config{IP: ip, Port: 81, Protocol: proto, Hosts: eps, EPPort: echo.Port})
			_, err = s.Hello(t, proto, netip.AddrPortFrom(ip, 81))
			require.NoError(t, err, "new port serves")
			_, err = s.Hello(t, proto, netip.AddrPortFrom(ip, 80))
			require.Error(t, err, "old port no longer serves")
		})
	})
	t.Run("service removed", func(t *testing.T) {
		forEach(t, func(t *testing.T, ip netip.Addr, proto servicelb.Protocol) {
			s := newSubject(t)
			cfg := Config{IP: ip, Port: 80, Protocol: proto, Hosts: eps, EPPort: echo.Port}
			s.Apply(t, cfg)
			svc := servicelb.Service{Ref: Ref, IP: ip, Ports: []servicelb.ServicePort{{Name: "p", Port: 80, Protocol: proto}}}.PortInfos()[0]
			// A long-lived UDP flow (one source port) is going on.
			var flow *net.UDPConn
			if proto == servicelb.UDP {
				var err error
				flow, err = s.Topo.Client.DialUDP(svc.Addr())
				require.NoError(t, err)
				defer flow.Close()
				_, _, err = UDPHello(flow, []byte("x"), 2*time.Second)
				require.NoError(t, err)
				require.NotZero(t, ServiceFlows(t, s.Topo, svc.Addr()), "the flow is tracked")
			}
			cfg.Port = 0
			s.Apply(t, cfg)
			if proto == servicelb.UDP {
				require.Zero(t, ServiceFlows(t, s.Topo, svc.Addr()), "conntrack entries of the removed UDP service flushed")
				_, _, err := UDPHello(flow, []byte("x"), 500*time.Millisecond)
				require.Error(t, err, "the old flow is not carried on")
			}
			_, err := s.Hello(t, proto, svc.Addr())
			require.Error(t, err, "removed service still answers")
			s.Removed(t, svc)
		})
	})
	t.Run("cleanup leftovers leaves no table", func(t *testing.T) {
		for _, ip := range families() {
			s := newSubject(t)
			s.Apply(t, Config{IP: ip, Port: 80, Protocol: servicelb.UDP, Hosts: eps, EPPort: echo.Port})
			require.True(t, s.Topo.TableExists(t, s.Table))
			require.NoError(t, s.Provider.CleanupLeftovers())
			require.False(t, s.Topo.TableExists(t, s.Table))
		}
	})
}

func endpointRemovedTCP(t *testing.T, s *Subject, ip netip.Addr, echo *Echo) {
	eps := s.Topo.Endpoints
	cfg := Config{IP: ip, Port: 80, Protocol: servicelb.TCP, Hosts: eps, EPPort: echo.Port}
	s.Apply(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := s.Topo.Client.DialTCP(ctx, netip.AddrPortFrom(ip, 80))
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	greet := make([]byte, 64)
	n, err := c.Read(greet)
	require.NoError(t, err)
	g, err := parseGreeting(string(greet[:n-1]))
	require.NoError(t, err)
	cfg.Hosts = without(eps, g.Endpoint)
	s.Apply(t, cfg)
	for range 6 {
		ng, err := s.Hello(t, servicelb.TCP, netip.AddrPortFrom(ip, 80))
		require.NoError(t, err)
		require.NotEqual(t, g.Endpoint, ng.Endpoint, "a new connection went to the removed endpoint")
	}
	// The established stream still works, half-close included.
	msg := []byte("still flowing")
	_, err = c.Write(msg)
	require.NoError(t, err)
	require.NoError(t, c.CloseWrite())
	back, err := io.ReadAll(c)
	require.NoError(t, err)
	require.Equal(t, msg, back)
}

func endpointRemovedUDP(t *testing.T, s *Subject, ip netip.Addr, echo *Echo) {
	eps := s.Topo.Endpoints
	cfg := Config{IP: ip, Port: 80, Protocol: servicelb.UDP, Hosts: eps, EPPort: echo.Port}
	s.Apply(t, cfg)
	flow, err := s.Topo.Client.DialUDP(netip.AddrPortFrom(ip, 80))
	require.NoError(t, err)
	defer flow.Close()
	g, _, err := UDPHello(flow, []byte("a"), 2*time.Second)
	require.NoError(t, err)
	again, _, err := UDPHello(flow, []byte("b"), 2*time.Second)
	require.NoError(t, err)
	require.Equal(t, g.Endpoint, again.Endpoint, "one flow, one endpoint")
	cfg.Hosts = without(eps, g.Endpoint)
	s.Apply(t, cfg)
	moved, _, err := UDPHello(flow, []byte("c"), 2*time.Second)
	require.NoError(t, err, "the flow of a removed endpoint must move, not black-hole")
	require.NotEqual(t, g.Endpoint, moved.Endpoint)
}

// ServiceFlows counts the UDP conntrack entries in the proxy namespace
// whose original destination is svc.
func ServiceFlows(t testing.TB, topo *Topology, svc netip.AddrPort) int {
	t.Helper()
	c, err := conntrack.Dial(&netlink.Config{NetNS: int(topo.Proxy.Handle)})
	require.NoError(t, err)
	defer c.Close()
	flows, err := c.Dump(nil)
	require.NoError(t, err)
	n := 0
	for _, f := range flows {
		if f.TupleOrig.Proto.Protocol == unix.IPPROTO_UDP && f.TupleOrig.IP.DestinationAddress.Unmap() == svc.Addr() &&
			f.TupleOrig.Proto.DestinationPort == svc.Port() {
			n++
		}
	}
	return n
}

// IsTimeout reports whether err is a deadline.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
