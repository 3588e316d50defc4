package userspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/internal/limits"
	"github.com/causeway-net/causeway/internal/netnsdo"
	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/kernel"
	"github.com/causeway-net/causeway/pkg/servicelb/userspace/relay"
)

// ErrProxyOnLocalhost is returned by NewProxier and NewCustomProxier for a
// loopback listen IP: any of 127.0.0.0/8 (the reference refuses 127.0.0.1
// only) and ::1. The kernel drops a routed packet translated to a loopback
// address, so such sockets would serve no client of the secondary network.
var ErrProxyOnLocalhost = errors.New("cannot proxy on localhost")

// TableName is the nftables (inet) table of the userspace provider.
const TableName = "causeway-svc-userspace"

// Defaults of Options.
const (
	DefaultUDPIdleTimeout = 30 * time.Second
	DefaultMaxUDPClients  = 4096
	DefaultMinSyncPeriod  = 100 * time.Millisecond
)

// Options are the settings of a Proxier besides NewProxier's arguments.
type Options struct {
	// NetNS is the namespace of the sockets, dials and rules (0 or -1: the
	// caller's).
	NetNS netns.NsHandle
	// Logger (slog.Default when nil).
	Logger *slog.Logger
	// Recorder receives the sockets' events (a LogRecorder when nil).
	Recorder servicelb.Recorder
	// MinSyncPeriod rate-limits Sync.
	MinSyncPeriod time.Duration
	// UDPIdleTimeout ends a UDP flow idle that long.
	UDPIdleTimeout time.Duration
	// MaxUDPClients bounds the UDP flows of each service port.
	MaxUDPClients int
	// NoRedirect leaves the kernel alone: the sockets are only reachable on
	// their own ports (for embedding the proxier behind another path).
	NoRedirect bool
	// OnSync is told of each sync of SyncLoop.
	OnSync servicelb.SyncObserver
	// MaxTCPPerClient bounds the TCP connections one client address holds
	// through NewProxier's relay (relay.Config.MaxPerClient); Refusals
	// counts its refusals.
	MaxTCPPerClient int
	Refusals        *limits.Refusals
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Recorder == nil {
		o.Recorder = servicelb.NewLogRecorder(o.Logger)
	}
	if o.MinSyncPeriod <= 0 {
		o.MinSyncPeriod = DefaultMinSyncPeriod
	}
	if o.UDPIdleTimeout <= 0 {
		o.UDPIdleTimeout = DefaultUDPIdleTimeout
	}
	if o.MaxUDPClients <= 0 {
		o.MaxUDPClients = DefaultMaxUDPClients
	}
}

// Proxier is the userspace provider: it keeps one ProxySocket per service
// port and the kernel rules that redirect service IP:port to it.
type Proxier struct {
	lb         servicelb.LoadBalancer
	listenIP   netip.Addr
	alloc      servicelb.PortAllocator
	makeSocket ProxySocketFunc
	opts       Options
	log        *slog.Logger
	runner     *servicelb.SyncRunner

	mu       sync.Mutex
	services map[servicelb.ServicePortName]*servicePort
	retired  map[*servicePort]struct{} // closed sockets whose connections go on
	stale    []kernel.StaleUDP         // removed UDP service ports, flushed after the rules
	closed   bool
	loops    sync.WaitGroup

	syncMu  sync.Mutex
	applied []redirect        // rules in the kernel, sorted
	flows   kernel.StaleFlows // stale flows to flush, a failed flush's kept

	relay *relay.Loop // NewProxier's TCP engine (nil with custom sockets)
}

var _ servicelb.Provider = (*Proxier)(nil)

type servicePort struct {
	info      *ServiceInfo
	socket    ProxySocket
	proxyPort uint16 // bound port
	done      chan struct{}
}

// NewProxier returns a userspace proxier with the default sockets: TCP
// service ports are served by one relay loop (package relay), UDP ones by
// NewProxySocket's sockets. listenIP
// is the address the sockets bind (unspecified: all); portRange bounds their
// ports (empty: the kernel's choice); syncPeriod is the period of the
// reconciliation in SyncLoop.
func NewProxier(lb servicelb.LoadBalancer, listenIP netip.Addr, portRange servicelb.PortRange, syncPeriod time.Duration, opts Options) (*Proxier, error) {
	if listenIP.IsLoopback() {
		return nil, ErrProxyOnLocalhost
	}
	opts.defaults()
	loop, err := relay.Start(relay.Config{NetNS: opts.NetNS, Log: opts.Logger.With("provider", servicelb.ProviderUserspace),
		MaxPerClient: opts.MaxTCPPerClient, Refusals: opts.Refusals})
	if err != nil {
		return nil, fmt.Errorf("userspace proxier: %w", err)
	}
	p, err := NewCustomProxier(lb, listenIP, portRange, syncPeriod, opts, relaySockets(loop))
	if err != nil {
		_ = loop.Close()
		return nil, err
	}
	p.relay = loop
	return p, nil
}

// NewCustomProxier is NewProxier with the socket constructor makeSocket. It
// removes what a previous process left in the kernel.
func NewCustomProxier(lb servicelb.LoadBalancer, listenIP netip.Addr, portRange servicelb.PortRange, syncPeriod time.Duration,
	opts Options, makeSocket ProxySocketFunc) (*Proxier, error) {
	if listenIP.IsLoopback() {
		return nil, ErrProxyOnLocalhost
	}
	if !listenIP.IsValid() {
		listenIP = netip.IPv6Unspecified()
	}
	opts.defaults()
	p := &Proxier{
		lb:         lb,
		listenIP:   listenIP.Unmap(),
		alloc:      servicelb.NewPortAllocator(portRange),
		makeSocket: makeSocket,
		opts:       opts,
		log:        opts.Logger.With("provider", servicelb.ProviderUserspace),
		services:   make(map[servicelb.ServicePortName]*servicePort),
		retired:    make(map[*servicePort]struct{}),
	}
	p.runner = servicelb.NewSyncRunner(p.syncOnce, opts.MinSyncPeriod, syncPeriod)
	if !opts.NoRedirect {
		if err := p.CleanupLeftovers(); err != nil {
			return nil, fmt.Errorf("userspace proxier: %w", err)
		}
	}
	return p, nil
}

// OnEndpointsUpdate hands the endpoints to the balancer and asks for a sync
// (UDP flows to vanished endpoints end there).
func (p *Proxier) OnEndpointsUpdate(endpoints []servicelb.Endpoints) {
	p.lb.OnEndpointsUpdate(endpoints)
	p.Sync()
}

// OnServiceUpdate makes the sockets equal to services: it opens those of new
// ports, reopens those whose protocol, IP, port or affinity changed and
// closes those of removed ports; then it asks for a sync of the rules.
func (p *Proxier) OnServiceUpdate(services []servicelb.Service) {
	want := servicelb.PortsByName(services, p.log)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	for name, sp := range p.services {
		if pi, ok := want[name]; ok && sp.info.SameConfig(pi) {
			// A new affinity timeout needs no new socket: the balancer
			// takes it. (ServiceInfo is never changed once its loop runs.)
			_ = p.lb.NewService(name, pi.Affinity, pi.AffinityTimeout)
			continue
		}
		p.stopLocked(name, sp)
		if _, ok := want[name]; !ok {
			p.lb.DeleteService(name)
		}
	}
	for name, pi := range want {
		if _, ok := p.services[name]; ok {
			continue
		}
		if err := p.startLocked(pi); err != nil {
			p.log.Error("open service port", "service", name.String(), "ref", pi.Ref.String(), "error", err)
		}
	}
	p.Sync()
}

func (p *Proxier) startLocked(pi servicelb.ServicePortInfo) error {
	if p.listenIP.IsValid() && !p.listenIP.IsUnspecified() && p.listenIP.Is4() != pi.IP.Is4() {
		return fmt.Errorf("service IP %s is not of the listen IP's family (%s)", pi.IP, p.listenIP)
	}
	port, err := p.alloc.AllocateNext()
	if err != nil {
		return err
	}
	var sock ProxySocket
	err = netnsdo.Do(p.opts.NetNS, func() (err error) {
		sock, err = p.makeSocket(pi.Protocol, p.listenIP, port)
		return err
	})
	if err != nil {
		p.alloc.Release(port)
		return err
	}
	bound := clientOf(sock.Addr()).Port()
	info := &ServiceInfo{
		ServicePortInfo: pi,
		Timeout:         p.opts.UDPIdleTimeout,
		MaxClients:      p.opts.MaxUDPClients,
		ActiveClients:   NewClientCache(),
		Recorder:        p.opts.Recorder,
		Dial:            p.dial,
		Log:             p.log,
	}
	if err := p.lb.NewService(pi.Name, pi.Affinity, pi.AffinityTimeout); err != nil {
		_ = sock.Close()
		p.alloc.Release(port)
		return err
	}
	sp := &servicePort{info: info, socket: sock, proxyPort: bound, done: make(chan struct{})}
	p.services[pi.Name] = sp
	p.loops.Add(1)
	go func() {
		defer p.loops.Done()
		defer close(sp.done)
		sock.ProxyLoop(pi.Name, info, p.lb)
	}()
	p.log.Info("service port open", "service", pi.Name.String(), "ref", pi.Ref.String(), "addr", pi.Addr().String(),
		"protocol", string(pi.Protocol), "proxyPort", bound)
	return nil
}

// stopLocked closes sp's socket (its loop ends on its own) and forgets its
// service port; a UDP port's flows end with it, at once. A socket whose
// connections outlive it is kept, retired, until they ended (pruneLocked)
// or Close.
func (p *Proxier) stopLocked(name servicelb.ServicePortName, sp *servicePort) {
	_ = sp.socket.Close()
	if sp.info.ActiveClients != nil {
		sp.info.ActiveClients.closeAll()
	}
	p.alloc.Release(sp.socket.ListenPort())
	delete(p.services, name)
	if _, ok := sp.socket.(ConnectionCloser); ok {
		p.retired[sp] = struct{}{}
	}
	if sp.info.Protocol == servicelb.UDP {
		p.stale = append(p.stale, kernel.StaleUDP{Service: sp.info.Addr()})
	}
	p.log.Info("service port closed", "service", name.String(), "ref", sp.info.Ref.String())
}

func (p *Proxier) dial(ctx context.Context, network, address string) (net.Conn, error) {
	var c net.Conn
	err := netnsdo.Do(p.opts.NetNS, func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	return c, err
}

// Sync asks for a reconciliation soon (rate-limited by MinSyncPeriod).
func (p *Proxier) Sync() { p.runner.Request() }

// SyncLoop reconciles on request and every sync period until ctx ends.
func (p *Proxier) SyncLoop(ctx context.Context) { p.runner.Run(ctx) }

func (p *Proxier) syncOnce() {
	start := time.Now()
	err := p.SyncNow()
	if err != nil {
		p.log.Error("sync", "error", err)
	}
	if p.opts.OnSync != nil {
		p.opts.OnSync(time.Since(start), err)
	}
}

// SyncNow reconciles at once: the redirect rules, the UDP flows of vanished
// endpoints, the conntrack entries of removed UDP ports and the expired
// affinity records.
func (p *Proxier) SyncNow() error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.mu.Lock()
	rules := make([]redirect, 0, len(p.services))
	type udpPort struct {
		name  servicelb.ServicePortName
		cache *ClientCache
	}
	var udp []udpPort
	for name, sp := range p.services {
		rules = append(rules, redirect{svc: sp.info.Addr(), proto: sp.info.Protocol, port: sp.proxyPort})
		if sp.info.Protocol == servicelb.UDP {
			udp = append(udp, udpPort{name, sp.info.ActiveClients})
		}
		p.lb.CleanupStaleStickySessions(name)
	}
	stale := p.stale
	p.stale = nil
	p.pruneLocked()
	p.mu.Unlock()

	var errs []error
	if !p.opts.NoRedirect {
		slices.SortFunc(rules, redirect.compare)
		if !slices.Equal(rules, p.applied) {
			if err := p.writeRules(rules); err != nil {
				errs = append(errs, err)
			} else {
				p.applied = rules
			}
		}
	}
	if eps, ok := p.lb.(interface {
		Endpoints(servicelb.ServicePortName) []netip.AddrPort
	}); ok {
		for _, u := range udp {
			cur := eps.Endpoints(u.name)
			u.cache.DropEndpoints(func(e netip.AddrPort) bool { return slices.Contains(cur, e) })
		}
	}
	if n, err := p.flows.Flush(p.opts.NetNS, stale); err != nil {
		errs = append(errs, err)
	} else if n > 0 {
		p.log.Info("conntrack entries of removed UDP service ports flushed", "count", n)
	}
	return errors.Join(errs...)
}

// pruneLocked forgets the retired sockets whose loop returned and whose
// connections all ended (none can start any more).
func (p *Proxier) pruneLocked() {
	for sp := range p.retired {
		select {
		case <-sp.done:
		default:
			continue
		}
		cc := sp.socket.(ConnectionCloser)
		if cc.Connections() == 0 {
			cc.CloseConnections() // waits for the goroutines' last steps
			delete(p.retired, sp)
		}
	}
}

// Port returns the bound port of svc's socket (0 when it has none).
func (p *Proxier) Port(svc servicelb.ServicePortName) uint16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sp, ok := p.services[svc]; ok {
		return sp.proxyPort
	}
	return 0
}

// socketAddr is the bound address of svc's socket.
func (p *Proxier) socketAddr(svc servicelb.ServicePortName) netip.AddrPort {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sp, ok := p.services[svc]; ok {
		return clientOf(sp.socket.Addr())
	}
	return netip.AddrPort{}
}

// Info returns svc's ServiceInfo (nil when it has no socket).
func (p *Proxier) Info(svc servicelb.ServicePortName) *ServiceInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sp, ok := p.services[svc]; ok {
		return sp.info
	}
	return nil
}

// CleanupLeftovers removes the userspace provider's table.
func (p *Proxier) CleanupLeftovers() error { return CleanupLeftovers(p.opts.NetNS) }

// CleanupLeftovers removes the userspace provider's table from ns; nil
// means it met no error.
func CleanupLeftovers(ns netns.NsHandle) error {
	if err := kernel.DeleteTable(ns, TableName); err != nil {
		return fmt.Errorf("cleanup leftovers: %w", err)
	}
	return nil
}

// Close closes every socket and every connection they relay, those of
// service ports removed earlier included, and waits for their goroutines;
// it does not wait for any client to hang up. Then it removes the kernel
// rules.
func (p *Proxier) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for name, sp := range p.services {
		p.stopLocked(name, sp)
	}
	retired := p.retired
	p.retired = nil
	p.mu.Unlock()
	for sp := range retired {
		sp.socket.(ConnectionCloser).CloseConnections()
	}
	p.loops.Wait()
	var errs []error
	if p.relay != nil {
		errs = append(errs, p.relay.Close())
	}
	if !p.opts.NoRedirect {
		errs = append(errs, p.CleanupLeftovers())
	}
	p.mu.Lock()
	stale := p.stale
	p.stale = nil
	p.mu.Unlock()
	p.syncMu.Lock()
	_, err := p.flows.Flush(p.opts.NetNS, stale)
	p.syncMu.Unlock()
	if err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

var _ servicelb.Inspector = (*Proxier)(nil)

// PortStates lists the service ports with a socket: endpoints (as the
// balancer has them), the socket's port and the UDP flows.
func (p *Proxier) PortStates() []servicelb.PortState {
	p.mu.Lock()
	defer p.mu.Unlock()
	eps, _ := p.lb.(interface {
		Endpoints(servicelb.ServicePortName) []netip.AddrPort
	})
	out := make([]servicelb.PortState, 0, len(p.services))
	for name, sp := range p.services {
		var list []netip.AddrPort
		if eps != nil {
			list = eps.Endpoints(name)
		}
		st := servicelb.NewPortState(sp.info.ServicePortInfo, list)
		st.ProxyPort = sp.proxyPort
		if c, ok := sp.socket.(interface{ Connections() int }); ok {
			st.TCPConnections = c.Connections()
		}
		if sp.info.Protocol == servicelb.UDP {
			st.UDPClients = sp.info.ActiveClients.Len()
			st.UDPRefused = sp.info.ActiveClients.Refused()
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b servicelb.PortState) int { return strings.Compare(a.Service, b.Service) })
	return out
}
