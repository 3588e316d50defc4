package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/limits"
)

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("proxy is closed")

// Proxy is the proxy's state machine. Its methods are safe for concurrent use.
//
// Locking: p.mu guards the model and is never held across an IPAM or
// dataplane call. IPAM calls for one connection id are serialized by a
// per-id lock (p.locks); different ids run in parallel.
type Proxy struct {
	cfg     Config
	log     *slog.Logger
	subnets map[ipamv1.IPFamily]*ipamv1.Subnet
	locks   keyLocks
	// refusals counts and logs the refusals of the limits.
	refusals *limits.Refusals
	// idRefusals counts and logs the target connections refused for
	// their client's identity (TargetIdentity).
	idRefusals *limits.Refusals
	// serialFamilies allocates the families one after the other (only the
	// benchmark's Meridio-like baseline sets it).
	serialFamilies bool

	mu        sync.Mutex
	closed    bool
	bridge    map[ipamv1.IPFamily]netip.Prefix
	conns     map[string]*connState
	links     map[int]string // link index → the key of the connection it belongs to (see connState.link)
	portsHops portsAndHops   // the ports and nexthops of the links
	removals  linkRemovals   // the links the next Apply deletes
	// releaseLeftovers: the hold on the state found at start ends
	// (ReleaseLeftovers).
	releaseLeftovers bool
	vipWanted        []netip.Prefix
	vipRejected      []error        // the entries of vipWanted rejected by the last validation
	vips             []netip.Prefix // accepted, sorted
	counters         counters

	// admitting are the new target connections admitted under their
	// client's limit whose addresses are being allocated (id → client),
	// not yet in conns: the limit counts them (admitTargetLocked).
	admitting map[string]string

	// hopsDown are the nexthops the datapath check found down
	// (SetNexthopsDown), left out of the desired state's routes.
	hopsDown map[netip.Addr]bool

	dirty chan struct{} // capacity 1: a sync is due
	watch watchers      // WatchTargets subscribers, signalled with every sync request
	// svcRoutes are the service routes via the gateway in targets' IP
	// contexts.
	svcRoutes serviceRoutes
	// owed are the connections whose leases a renewal could not renew
	// (the IPAM did not answer); owedKick wakes the owed loop.
	owed     map[string]struct{}
	owedKick chan struct{}
	// retaining: Retain was called, closes keep their addresses.
	retaining bool

	// Background goroutines (syncer, renewer) stop when bgCancel is called.
	bgCancel context.CancelFunc
	bgWG     sync.WaitGroup
	// Releases run under relCtx; force is closed by Close to skip delays.
	relCtx    context.Context
	relCancel context.CancelFunc
	relWG     sync.WaitGroup
	force     chan struct{}
	closeOnce sync.Once
}

// counters are the event counters reported by Stats.
type counters struct {
	ipamErrors    uint64
	applyErrors   uint64
	applies       uint64
	vipRejected   uint64
	releases      uint64
	releaseCancel uint64
	rollbacks     uint64
	bridgeChanges uint64
	// renewalsDeferred counts renewals the IPAM did not answer, answered
	// with the addresses held.
	renewalsDeferred uint64
}

// New builds a proxy and blocks until the bridge address of every family has
// been allocated (retrying every RetryInterval until ctx is done). It then
// pushes the first state to the dataplane and starts the bridge renewal.
// Close stops everything New started.
func New(ctx context.Context, cfg Config) (*Proxy, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		cfg:      cfg,
		log:      cfg.Logger.With("conduit", cfg.Conduit, "trench", cfg.Trench, "node", cfg.Node),
		refusals: limits.New("causeway_proxy", cfg.Logger),
		idRefusals: limits.NewNamed("causeway_proxy", "target_identity_refusals_total",
			"Target connections refused for their client's SPIFFE ID, by rule (unproved, not_allowed).",
			"target connection refused for its client's identity (logged once per client)", cfg.Logger),
		subnets:   map[ipamv1.IPFamily]*ipamv1.Subnet{},
		bridge:    map[ipamv1.IPFamily]netip.Prefix{},
		conns:     map[string]*connState{},
		admitting: map[string]string{},
		links:     map[int]string{},
		portsHops: newPortsAndHops(),
		dirty:     make(chan struct{}, 1),
		force:     make(chan struct{}),
		owed:      map[string]struct{}{},
		owedKick:  make(chan struct{}, 1),
	}
	for _, f := range cfg.Families {
		p.subnets[f] = &ipamv1.Subnet{
			Conduit:  &nspv1.Conduit{Name: cfg.Conduit, Trench: &nspv1.Trench{Name: cfg.Trench}},
			Node:     cfg.Node,
			IpFamily: f,
		}
	}
	if err := p.allocateBridge(ctx); err != nil {
		return nil, err
	}
	p.relCtx, p.relCancel = context.WithCancel(context.Background())
	bgCtx, bgCancel := context.WithCancel(context.Background())
	p.bgCancel = bgCancel
	p.bgWG.Add(3)
	go p.syncLoop(bgCtx)
	go p.renewLoop(bgCtx)
	go p.owedLoop(bgCtx)
	// The bridge allocation marked the state dirty: the syncer's first
	// Apply pushes it.
	p.log.Info("proxy started", "bridge", p.BridgeAddrs())
	return p, nil
}

// Close stops the proxy: pending releases skip their delay and run at once,
// in parallel, bounded by ctx; then the background goroutines stop. Calls
// made after Close fail with ErrClosed. Close does not touch the kernel.
// It returns an error if ctx ended before every pending release was done.
func (p *Proxy) Close(ctx context.Context) error {
	var err error
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		pending := 0
		for _, st := range p.conns {
			if st.release != nil {
				pending++
			}
		}
		p.mu.Unlock()
		p.log.Info("proxy closing", "pendingReleases", pending)
		close(p.force)

		done := make(chan struct{})
		go func() {
			p.relWG.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			p.relCancel()
			<-done
			left := p.Stats().PendingReleases
			err = fmt.Errorf("close proxy: %d releases not done: %w", left, ctx.Err())
		}
		p.relCancel()
		p.bgCancel()
		p.bgWG.Wait()
		p.log.Info("proxy closed")
	})
	return err
}

// markDirty asks the syncer to push the state to the dataplane.
func (p *Proxy) markDirty() {
	p.watch.signal()
	select {
	case p.dirty <- struct{}{}:
	default:
	}
}

// goRelease starts a release goroutine owned by the proxy, unless the proxy
// is closed. p.mu must be held.
func (p *Proxy) goReleaseLocked(f func()) bool {
	if p.closed {
		return false
	}
	p.relWG.Add(1)
	go func() {
		defer p.relWG.Done()
		f()
	}()
	return true
}
