package userspace

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/causeway-net/causeway/pkg/servicelb"
)

// maxDatagram holds any UDP payload (IPv6 jumbograms aside): datagrams up
// to 64 KiB pass whole.
const maxDatagram = 64 << 10

// ClientCache is the set of UDP flows of one service port: one backend
// socket per client address, bounded by ServiceInfo.MaxClients.
type ClientCache struct {
	mu      sync.Mutex
	clients map[netip.AddrPort]*udpClient
	refused uint64
}

// NewClientCache returns an empty cache.
func NewClientCache() *ClientCache {
	return &ClientCache{clients: make(map[netip.AddrPort]*udpClient)}
}

// Len is the number of live flows.
func (c *ClientCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.clients)
}

// Refused is the number of flows refused because the cache was full.
func (c *ClientCache) Refused() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

// DropEndpoints ends the flows whose endpoint keep rejects (the endpoint
// left the service); the next datagram of such a client opens a new flow.
func (c *ClientCache) DropEndpoints(keep func(netip.AddrPort) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for client, cl := range c.clients {
		if !keep(cl.endpoint) {
			_ = cl.conn.Close()
			delete(c.clients, client)
			n++
		}
	}
	return n
}

// closeAll ends every flow: its endpoint connection is closed and the flow
// forgotten (its reply goroutine then returns).
func (c *ClientCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for client, cl := range c.clients {
		_ = cl.conn.Close()
		delete(c.clients, client)
	}
}

type udpClient struct {
	conn     net.Conn
	endpoint netip.AddrPort
}

type udpSocket struct {
	c    *net.UDPConn
	port int
	wg   sync.WaitGroup
}

func newUDPSocket(c *net.UDPConn, port int) *udpSocket { return &udpSocket{c: c, port: port} }

func (s *udpSocket) Addr() net.Addr  { return s.c.LocalAddr() }
func (s *udpSocket) ListenPort() int { return s.port }
func (s *udpSocket) Close() error    { return s.c.Close() }

// ProxyLoop reads datagrams until Close and relays each to its client's
// flow. A read error other than the socket's closing is reported and the
// loop goes on: the service port never dies of it.
func (s *udpSocket) ProxyLoop(svc servicelb.ServicePortName, info *ServiceInfo, lb servicelb.LoadBalancer) {
	cache := info.ActiveClients
	defer func() {
		cache.closeAll()
		s.wg.Wait()
	}()
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := s.c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			info.record(servicelb.EventReadError, netip.AddrPort{}, netip.AddrPort{}, err)
			time.Sleep(5 * time.Millisecond)
			continue
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		cl, ok := s.flow(svc, from, info, lb)
		if !ok {
			continue
		}
		_ = cl.conn.SetDeadline(time.Now().Add(info.Timeout))
		if _, err := cl.conn.Write(buf[:n]); err != nil {
			info.Log.Debug("udp write to endpoint", "service", svc.String(), "endpoint", cl.endpoint.String(), "error", err)
		}
	}
}

// flow returns client's flow, opening it (and its reply goroutine) if new.
func (s *udpSocket) flow(svc servicelb.ServicePortName, client netip.AddrPort, info *ServiceInfo, lb servicelb.LoadBalancer) (*udpClient, bool) {
	cache := info.ActiveClients
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if cl, ok := cache.clients[client]; ok {
		return cl, true
	}
	if info.MaxClients > 0 && len(cache.clients) >= info.MaxClients {
		cache.refused++
		info.record(servicelb.EventClientsFull, client, netip.AddrPort{}, nil)
		return nil, false
	}
	c, ep, err := TryConnectEndpoints(context.Background(), svc, client, "udp", info, lb)
	if err != nil {
		return nil, false
	}
	cl := &udpClient{conn: c, endpoint: ep}
	cache.clients[client] = cl
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.replies(client, cl, info)
	}()
	return cl, true
}

// replies sends the endpoint's datagrams back to client from the service
// socket (so the kernel's reverse translation makes them come from the
// service IP:port) until the flow is idle for info.Timeout or closed.
func (s *udpSocket) replies(client netip.AddrPort, cl *udpClient, info *ServiceInfo) {
	defer func() {
		info.ActiveClients.mu.Lock()
		if info.ActiveClients.clients[client] == cl {
			delete(info.ActiveClients.clients, client)
		}
		info.ActiveClients.mu.Unlock()
		_ = cl.conn.Close()
	}()
	buf := make([]byte, maxDatagram)
	for {
		_ = cl.conn.SetDeadline(time.Now().Add(info.Timeout))
		n, err := cl.conn.Read(buf)
		if err != nil {
			return
		}
		if _, err := s.c.WriteToUDPAddrPort(buf[:n], client); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
		}
	}
}
