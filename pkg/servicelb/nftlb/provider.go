// Package nftlb is the nftables provider of the service load balancer: no
// user-space hop, the kernel DNATs each new connection or UDP flow to an
// endpoint. Endpoint choice is a deterministic round robin (an incrementing
// counter, numgen inc), ClientIP affinity lives in timed elements (endpoint
// id, client address), the client's source address is kept, and everything is in one
// inet table of our own, changed by one atomic transaction per sync that
// carries only what changed.
package nftlb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/kernel"
)

// TableName is the nftables (inet) table of the provider.
const TableName = "causeway-svc"

// DefaultMinSyncPeriod rate-limits Sync when Options gives no period.
const DefaultMinSyncPeriod = 100 * time.Millisecond

// Options are the provider's settings.
type Options struct {
	// NetNS is the namespace of the rules (0 or -1: the caller's).
	NetNS netns.NsHandle
	// Logger (slog.Default when nil).
	Logger *slog.Logger
	// MinSyncPeriod rate-limits Sync; SyncPeriod is the periodic resync.
	MinSyncPeriod time.Duration
	SyncPeriod    time.Duration
	// OnSync is told of each sync of SyncLoop.
	OnSync servicelb.SyncObserver
}

// Provider programs the kernel from services and endpoints.
type Provider struct {
	opts   Options
	log    *slog.Logger
	runner *servicelb.SyncRunner

	mu        sync.Mutex
	ports     map[servicelb.ServicePortName]servicelb.ServicePortInfo
	endpoints map[servicelb.ServicePortName][]netip.AddrPort

	syncMu  sync.Mutex
	applied *state              // nil: our table is not (known to be) there
	hairpin map[netip.Addr]bool // endpoint addresses in the hairpin sets (with applied)
	inputs  inputs              // what applied was computed from
	ids     ids
	stats   servicelb.SyncStats
	stale   kernel.StaleFlows // UDP flows to flush, a failed flush's kept
}

var _ servicelb.Provider = (*Provider)(nil)

// New returns a provider; it removes what a previous process left. Clients
// and endpoints that are ports of one bridge need bridge netfilter in the
// namespace (an endpoint's reply to a client on the same bridge then passes
// our connection tracking and gets its source turned back into the service
// IP:port): the proxy's dataplane turns it on
// (dataplane.Options.BridgeNetfilter), not the provider.
func New(opts Options) (*Provider, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MinSyncPeriod <= 0 {
		opts.MinSyncPeriod = DefaultMinSyncPeriod
	}
	p := &Provider{
		opts:      opts,
		log:       opts.Logger.With("provider", servicelb.ProviderNftables),
		ports:     make(map[servicelb.ServicePortName]servicelb.ServicePortInfo),
		endpoints: make(map[servicelb.ServicePortName][]netip.AddrPort),
		ids:       ids{m: make(map[string]uint32)},
	}
	p.runner = servicelb.NewSyncRunner(p.syncOnce, opts.MinSyncPeriod, opts.SyncPeriod)
	if err := p.CleanupLeftovers(); err != nil {
		return nil, fmt.Errorf("nftables provider: %w", err)
	}
	return p, nil
}

// OnServiceUpdate replaces the service ports and asks for a sync.
func (p *Provider) OnServiceUpdate(services []servicelb.Service) {
	ports := servicelb.PortsByName(services, p.log)
	p.mu.Lock()
	p.ports = ports
	p.mu.Unlock()
	p.Sync()
}

// OnEndpointsUpdate replaces the endpoints and asks for a sync.
func (p *Provider) OnEndpointsUpdate(endpoints []servicelb.Endpoints) {
	eps := make(map[servicelb.ServicePortName][]netip.AddrPort)
	for _, e := range endpoints {
		for name, list := range e.ByPort() {
			eps[name] = append(eps[name], list...)
		}
	}
	p.mu.Lock()
	p.endpoints = eps
	p.mu.Unlock()
	p.Sync()
}

// Sync asks for a sync soon (rate-limited).
func (p *Provider) Sync() { p.runner.Request() }

// SyncLoop syncs on request and every sync period until ctx ends.
func (p *Provider) SyncLoop(ctx context.Context) { p.runner.Run(ctx) }

func (p *Provider) syncOnce() {
	start := time.Now()
	err := p.SyncNow()
	if err != nil {
		p.log.Error("sync", "error", err)
	}
	if p.opts.OnSync != nil {
		p.opts.OnSync(time.Since(start), err)
	}
}

// Stats returns the figures of the syncs so far (servicelb.StatsReporter).
func (p *Provider) Stats() servicelb.SyncStats {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	return p.stats
}

// SyncNow makes the table equal to the services and endpoints at once: one
// transaction with only the differences from what was applied, then a
// flush of the conntrack entries that lead to removed UDP service ports or
// endpoints.
func (p *Provider) SyncNow() error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.mu.Lock()
	cur := newInputs(p.ports, p.endpoints)
	p.mu.Unlock()
	start := time.Now()
	old, want := p.fragments(cur)
	hairpin := cur.endpointAddrs()
	n, err := p.apply(old, want, hairpin)
	p.stats.Syncs++
	p.stats.LastObjects = n
	p.stats.TotalObjects += uint64(n)
	p.stats.LastDuration = time.Since(start)
	if err != nil {
		// The transaction did not happen; start again from an empty table.
		p.applied = nil
		return errors.Join(err, kernel.DeleteTable(p.opts.NetNS, TableName))
	}
	if p.applied == nil {
		p.applied = want
	} else {
		p.applied.merge(old, want)
	}
	p.hairpin = hairpin
	p.inputs = cur
	p.ids.drop(old, want)
	return p.flushStale(staleUDP(old, want))
}

// flushStale flushes the conntrack entries of stale UDP flows, with those
// a failed flush left (see kernel.StaleFlows): after a failure they wait
// for the next sync, the sync loop's period at the latest. syncMu must be
// held.
func (p *Provider) flushStale(stale []kernel.StaleUDP) error {
	flushed, err := p.stale.Flush(p.opts.NetNS, stale)
	p.stats.ConntrackFlushed += uint64(flushed)
	return err
}

// fragments returns the part of the applied state that cur changes, and
// what it becomes: only the service ports whose inputs differ and the IP
// chains of their service IPs (everything when nothing is applied yet), so
// a sync's cost follows the size of the change, not of the table.
func (p *Provider) fragments(cur inputs) (old, want *state) {
	if p.applied == nil {
		return newState(), desired(cur, cur.allPorts(), &p.ids)
	}
	dirty := changed(p.inputs, cur)
	old = desired(p.inputs, dirty, &p.ids)
	want = desired(cur, dirty, &p.ids)
	for ip := range old.dispatch {
		if _, ok := cur.byIP[ip]; ok {
			want.dispatch[ip] = ipChainOf(cur, ip)
		}
	}
	for ip := range want.dispatch {
		old.dispatch[ip] = p.applied.dispatch[ip]
	}
	for ip := range old.dispatch {
		if ic, ok := p.applied.dispatch[ip]; ok {
			old.dispatch[ip] = ic
		} else {
			delete(old.dispatch, ip)
		}
	}
	return old, want
}

// staleUDP lists what conntrack entries must go between two states: UDP
// service ports removed or moved, and endpoints that left a UDP service port.
func staleUDP(old, cur *state) []kernel.StaleUDP {
	if old == nil {
		return nil
	}
	var out []kernel.StaleUDP
	for name, op := range old.ports {
		if op.info.Protocol != servicelb.UDP {
			continue
		}
		np, ok := cur.ports[name]
		if !ok || np.info.Addr() != op.info.Addr() || np.info.Protocol != servicelb.UDP {
			out = append(out, kernel.StaleUDP{Service: op.info.Addr()})
			continue
		}
		for _, e := range op.eps {
			if !slices.Contains(np.eps, e) {
				out = append(out, kernel.StaleUDP{Service: op.info.Addr(), Endpoint: e})
			}
		}
	}
	return out
}

// CleanupLeftovers removes the provider's table.
func (p *Provider) CleanupLeftovers() error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.applied = nil
	return CleanupLeftovers(p.opts.NetNS)
}

// CleanupLeftovers removes the nftables provider's table from ns; nil means
// it met no error.
func CleanupLeftovers(ns netns.NsHandle) error {
	if err := kernel.DeleteTable(ns, TableName); err != nil {
		return fmt.Errorf("cleanup leftovers: %w", err)
	}
	return nil
}

// Close removes the table and flushes the UDP conntrack entries of every
// service port.
func (p *Provider) Close() error {
	p.syncMu.Lock()
	old := p.applied
	p.syncMu.Unlock()
	err := p.CleanupLeftovers()
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	if ferr := p.flushStale(staleUDP(old, newState())); ferr != nil {
		err = errors.Join(err, ferr)
	}
	return err
}
