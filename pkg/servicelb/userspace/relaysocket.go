package userspace

import (
	"net"
	"net/netip"

	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/userspace/relay"
)

// relaySocket is the TCP ProxySocket of NewProxier: a listening socket
// whose connections the proxier's relay loop accepts, dials and splices,
// with no goroutine per connection.
type relaySocket struct {
	ln   *relay.Listener
	port int
}

// relaySockets is the ProxySocketFunc of NewProxier: TCP service ports on
// loop, UDP ones as NewProxySocket makes them.
func relaySockets(loop *relay.Loop) ProxySocketFunc {
	return func(protocol servicelb.Protocol, ip netip.Addr, port int) (ProxySocket, error) {
		if protocol != servicelb.TCP {
			return NewProxySocket(protocol, ip, port)
		}
		ln, err := loop.Listen(ip, port)
		if err != nil {
			return nil, err
		}
		return &relaySocket{ln: ln, port: port}, nil
	}
}

func (s *relaySocket) Addr() net.Addr    { return net.TCPAddrFromAddrPort(s.ln.Addr()) }
func (s *relaySocket) ListenPort() int   { return s.port }
func (s *relaySocket) Close() error      { return s.ln.Close() }
func (s *relaySocket) CloseConnections() { s.ln.CloseConnections() }
func (s *relaySocket) Connections() int  { return s.ln.Connections() }

// ProxyLoop hands the socket to the relay loop and returns once it is
// closed; its connections in flight go on in the loop.
func (s *relaySocket) ProxyLoop(svc servicelb.ServicePortName, info *ServiceInfo, lb servicelb.LoadBalancer) {
	err := s.ln.Serve(relay.Service{
		Pick: func(client netip.AddrPort, reset bool) (netip.AddrPort, error) {
			return lb.NextEndpoint(svc, client.Addr(), reset)
		},
		Record: func(reason servicelb.EventReason, client, endpoint netip.AddrPort, err error) {
			info.record(reason, client, endpoint, err)
		},
	})
	if err != nil {
		info.Log.Error("serve service port", "service", svc.String(), "error", err)
	}
}
