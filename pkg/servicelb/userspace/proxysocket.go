// Package userspace is the userspace provider of the service load balancer:
// one ProxySocket per service port accepts what the kernel redirects to it
// (nftables, in a table of its own) and relays each connection or UDP flow
// to an endpoint chosen by a servicelb.LoadBalancer. NewProxier's TCP
// sockets are served by one epoll loop (package relay) with no goroutine
// per connection; NewProxySocket's are the portable ones on Go's net. Its
// one advantage over the kernel path is failover: a refused dial is
// retried on the next endpoint.
package userspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"github.com/causeway-net/causeway/internal/backoff"
	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/userspace/relay"
)

// ServiceInfo is what a ProxySocket needs to serve its service port.
type ServiceInfo struct {
	servicelb.ServicePortInfo
	// Timeout is the idle timeout of a UDP flow.
	Timeout time.Duration
	// MaxClients bounds the UDP flows (backend sockets) of the port.
	MaxClients int
	// ActiveClients holds the UDP flows.
	ActiveClients *ClientCache
	// Recorder receives the socket's events, with the service reference.
	Recorder servicelb.Recorder
	// Dial opens a connection to an endpoint (in the proxier's namespace).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Log is the socket's logger.
	Log *slog.Logger
}

func (i *ServiceInfo) record(reason servicelb.EventReason, client, endpoint netip.AddrPort, err error) {
	i.Recorder.Record(servicelb.Event{Ref: i.Ref, Service: i.Name, Reason: reason, Client: client, Endpoint: endpoint, Err: err})
}

// ProxySocket is the socket of one service port. Other packages may
// implement it and hand a constructor to NewCustomProxier.
type ProxySocket interface {
	// Addr is the bound local address.
	Addr() net.Addr
	// Close stops accepting. TCP connections in flight continue; UDP flows
	// end.
	Close() error
	// ProxyLoop serves until Close and returns then. Goroutines of the
	// socket that outlive it (those of TCP connections in flight) are the
	// socket's: it implements ConnectionCloser.
	ProxyLoop(svc servicelb.ServicePortName, info *ServiceInfo, lb servicelb.LoadBalancer)
	// ListenPort is the port asked for at construction (0: the kernel's
	// choice).
	ListenPort() int
}

// ConnectionCloser is implemented by sockets whose connections outlive
// Close. The proxier keeps such a socket after its service port went,
// until its connections ended, and closes them at its own Close.
type ConnectionCloser interface {
	// CloseConnections aborts the relayed connections and pending dials
	// and returns once they ended. It may be called at any time, and more
	// than once.
	CloseConnections()
	// Connections is the number of connections being relayed or dialled.
	Connections() int
}

// ProxySocketFunc opens the socket of a service port on ip:port.
type ProxySocketFunc func(protocol servicelb.Protocol, ip netip.Addr, port int) (ProxySocket, error)

// NewProxySocket is a ProxySocketFunc on Go's net package: a TCP listener
// whose connections each get a goroutine (TryConnectEndpoints, ProxyTCP),
// or a UDP socket, on ip:port (all addresses when ip is unspecified or
// unset). NewProxier uses it for UDP; its TCP sockets use the relay loop.
func NewProxySocket(protocol servicelb.Protocol, ip netip.Addr, port int) (ProxySocket, error) {
	host := ""
	if ip.IsValid() && !ip.IsUnspecified() {
		host = ip.String()
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	switch protocol {
	case servicelb.TCP:
		l, err := keepAliveListen.Listen(context.Background(), "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("listen tcp %s: %w", addr, err)
		}
		return newTCPSocket(l.(*net.TCPListener), port), nil
	case servicelb.UDP:
		ua, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", addr, err)
		}
		c, err := net.ListenUDP("udp", ua)
		if err != nil {
			return nil, fmt.Errorf("listen udp %s: %w", addr, err)
		}
		return newUDPSocket(c, port), nil
	}
	return nil, fmt.Errorf("unknown protocol %q", protocol)
}

// dialTimeouts are the successive dial timeouts; each failed dial moves the
// client to the next endpoint (the relay loop's schedule).
var dialTimeouts = relay.DialTimeouts

// ErrNoEndpointReachable is returned when every dial attempt failed.
var ErrNoEndpointReachable = errors.New("no endpoint reachable")

// TryConnectEndpoints dials an endpoint of svc for client over network,
// retrying with growing timeouts and a short backoff; after a failure the
// balancer is asked with reset, so a sticky client moves on. It returns the
// connection and the endpoint.
func TryConnectEndpoints(ctx context.Context, svc servicelb.ServicePortName, client netip.AddrPort, network string,
	info *ServiceInfo, lb servicelb.LoadBalancer) (net.Conn, netip.AddrPort, error) {
	reset := false
	for i, timeout := range dialTimeouts {
		if i > 0 && !backoff.Sleep(ctx, relay.RetryPause(i)) {
			return nil, netip.AddrPort{}, ctx.Err()
		}
		ep, err := lb.NextEndpoint(svc, client.Addr(), reset)
		if err != nil {
			info.record(servicelb.EventNoEndpoints, client, netip.AddrPort{}, err)
			return nil, netip.AddrPort{}, fmt.Errorf("choose an endpoint of %s: %w", svc, err)
		}
		dctx, cancel := context.WithTimeout(ctx, timeout)
		c, err := info.Dial(dctx, network, ep.String())
		cancel()
		if err == nil {
			info.record(servicelb.EventEndpointChosen, client, ep, nil)
			return c, ep, nil
		}
		info.record(servicelb.EventDialFailed, client, ep, err)
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			return nil, ep, fmt.Errorf("dial %s: %w", ep, err) // retrying cannot help
		}
		reset = true
	}
	return nil, netip.AddrPort{}, fmt.Errorf("%s: %w after %d attempts", svc, ErrNoEndpointReachable, len(dialTimeouts))
}

// clientOf is a socket address as an AddrPort, IPv4-mapped addresses
// unmapped (zero for other kinds of address).
func clientOf(a net.Addr) netip.AddrPort {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case *net.UDPAddr:
		ap = a.AddrPort()
	default:
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
