package ipam

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/causeway-net/causeway/internal/clock"
	"github.com/causeway-net/causeway/internal/limits"
	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// Subnet names a node subnet of one family, as ipam.v1.Subnet does.
type Subnet struct {
	Trench  string
	Conduit string
	Node    string
	Family  Family
}

// Engine is the IPAM allocation engine. It is safe for concurrent use.
type Engine struct {
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	w        *writer
	trenches map[Family]*trench // fixed after New
	stats    *storeStats
	refusals *limits.Refusals

	// nsp is the last conduit list of the configuration server (nil until
	// the first one).
	nspMu sync.Mutex
	nsp   map[string]struct{}

	closeOnce sync.Once
	stop      chan struct{}
	loops     sync.WaitGroup
}

// New loads the store, reconciles it with cfg, runs the first garbage
// collection and starts the collector and lease flusher. The caller keeps
// ownership of st and closes it after Engine.Close.
func New(ctx context.Context, st store.Store, cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("ipam config: %w", err)
	}
	if cfg.LeaseFlushInterval == 0 {
		cfg.LeaseFlushInterval = time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	e := &Engine{
		refusals: limits.New(metricsNamespace, cfg.Logger),
		cfg:      cfg,
		log:      cfg.Logger,
		now:      cfg.Clock.Now,
		trenches: map[Family]*trench{},
		stats:    newStoreStats(),
		stop:     make(chan struct{}),
	}
	ops, err := e.load(func(f func(store.Record) error) error { return store.Each(ctx, st, f) })
	if err != nil {
		return nil, fmt.Errorf("%w: load: %w", ErrUnavailable, err)
	}
	e.w = newWriter(st, cfg.MaxBatch, e.log, e.stats.observe, cfg.OnStoreHealth)
	var seq uint64
	if len(ops) > 0 {
		seq = e.w.enqueue(ops...)
	}
	if err := e.w.wait(ctx, seq); err != nil {
		e.w.close()
		return nil, fmt.Errorf("persist initial state: %w", err)
	}
	if cfg.GCInterval > 0 {
		e.CollectGarbage()
		e.loops.Add(1)
		go e.every(cfg.GCInterval, func() { e.CollectGarbage() })
	}
	e.loops.Add(1)
	go e.every(cfg.LeaseFlushInterval, e.FlushLeases)
	return e, nil
}

func (e *Engine) every(d time.Duration, f func()) {
	defer e.loops.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			f()
		case <-e.stop:
			return
		}
	}
}

// Close stops the background loops, queues the renewed leases and commits
// everything queued. Calls after the first do nothing. Requests after Close
// fail with ErrUnavailable.
func (e *Engine) Close() {
	e.closeOnce.Do(func() {
		close(e.stop)
		e.loops.Wait()
		e.FlushLeases()
		e.w.close()
	})
}

func (e *Engine) closed() bool { return isClosed(e.stop) }

func (e *Engine) validate(s Subnet, childName string) (*trench, error) {
	if err := ValidateName("trench", s.Trench, false); err != nil {
		return nil, err
	}
	if err := ValidateName("conduit", s.Conduit, false); err != nil {
		return nil, err
	}
	if err := ValidateName("node", s.Node, true); err != nil {
		return nil, err
	}
	if err := ValidateName("child", childName, false); err != nil {
		return nil, err
	}
	if s.Family != IPv4 && s.Family != IPv6 {
		return nil, fmt.Errorf("%w: unknown address family %d", ErrInvalidArgument, s.Family)
	}
	if s.Trench != e.cfg.Trench {
		return nil, fmt.Errorf("%w: trench %q (this IPAM serves trench %q)", ErrNotServed, s.Trench, e.cfg.Trench)
	}
	t := e.trenches[s.Family]
	if t == nil {
		return nil, fmt.Errorf("%w: family %s", ErrNotServed, s.Family)
	}
	if e.closed() {
		return nil, fmt.Errorf("%w: shutting down", ErrUnavailable)
	}
	return t, nil
}

// Allocate returns the address of the named child with the node's prefix
// length, creating the conduit, node and child as needed, and renews the
// node's and child's leases. It is idempotent: the same child gets the same
// address until it is released or collected. A new child is returned only
// once it is durable.
//
// In a draining conduit (see SyncConduits) an existing child is renewed and
// gets its address as usual; a new child or node fails with ErrDraining.
// A new child is not created once ctx is done (see allocate).
func (e *Engine) Allocate(ctx context.Context, s Subnet, childName string) (netip.Prefix, error) {
	t, err := e.validate(s, childName)
	if err != nil {
		return netip.Prefix{}, err
	}
	now := e.now().UnixNano()
	ch, err := e.allocate(ctx, t, s.Conduit, s.Node, childName, now)
	if err != nil {
		return netip.Prefix{}, err
	}
	if err := e.w.wait(ctx, ch.seq); err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(ch.addr, t.nodeLen), nil
}

// allocate does the in-memory part of Allocate and queues the changes. A
// new child is not created once ctx is done (its caller gave up, and may
// already have released the child in a call that overtook this one);
// ctx is checked under the node's lock, where a Release of the child
// removes it.
func (e *Engine) allocate(ctx context.Context, t *trench, cname, nname, chname string, now int64) (*child, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	c := t.conduits[cname]
	for c == nil {
		t.mu.RUnlock()
		err := e.createConduit(t, cname)
		t.mu.RLock()
		if err != nil {
			return nil, err
		}
		c = t.conduits[cname] // removed again in between: create again
	}

	// A draining conduit (dropped by the configuration server) renews what
	// it holds and creates nothing: its addresses may still be in use.
	draining := c.draining

	c.mu.RLock()
	defer c.mu.RUnlock()
	n := c.nodes[nname]
	for n == nil {
		if draining {
			return nil, drainingError(cname)
		}
		c.mu.RUnlock()
		err := e.createNode(t, c, nname, now)
		c.mu.RLock()
		if err != nil {
			return nil, err
		}
		n = c.nodes[nname] // collected in between: create again
	}
	if !draining {
		n.renew(now)
	}

	// Renewed under the node's lock: the collector, which holds it for
	// writing, either sees the renewal or has removed the child before.
	n.mu.RLock()
	ch := n.children[chname]
	if ch != nil {
		ch.renew(now)
		n.renew(now)
	}
	n.mu.RUnlock()
	if ch != nil {
		return ch, nil
	}
	if draining {
		return nil, drainingError(cname)
	}

	n.mu.Lock()
	defer n.mu.Unlock()
	if ch := n.children[chname]; ch != nil {
		ch.renew(now)
		return ch, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if max := e.cfg.MaxChildrenPerNode; max > 0 && len(n.children) >= max {
		e.refusals.Refuse("children_per_node", max, t.family.String()+" "+cname+" "+nname, "child", chname)
		return nil, fmt.Errorf("%w: node %q of conduit %q (%s) holds %d addresses, the limit", ErrExhausted, nname, cname, n.prefix, max)
	}
	i, ok := n.slots.take()
	if !ok {
		return nil, fmt.Errorf("%w: node %q of conduit %q (%s) is full", ErrExhausted, nname, cname, n.prefix)
	}
	ch = &child{name: chname, index: i, addr: subPrefix(n.prefix, t.childLen, i).Addr()}
	ch.updated.Store(now)
	ch.flushed.Store(now)
	ch.seq = e.w.enqueue(store.Op{Kind: store.OpPut, Record: store.Record{
		Key: t.childKey(cname, nname, chname), Prefix: netip.PrefixFrom(ch.addr, t.childLen), Updated: time.Unix(0, now),
	}})
	n.children[chname] = ch
	e.log.Debug("allocated", "family", t.family, "conduit", cname, "node", nname, "child", chname, "address", ch.addr)
	return ch, nil
}

func (e *Engine) createConduit(t *trench, name string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conduits[name] != nil {
		return nil
	}
	if max := e.cfg.MaxConduits; max > 0 && len(t.conduits) >= max {
		e.refusals.Refuse("conduits_per_trench", max, t.family.String()+" "+t.name, "conduit", name)
		return fmt.Errorf("%w: trench %q has %d conduits, the limit (conduit %q refused)", ErrExhausted, t.name, max, name)
	}
	i, ok := t.slots.take()
	if !ok {
		return fmt.Errorf("%w: pool %s of trench %q is full (no free /%d for conduit %q)", ErrExhausted, t.pool, t.name, t.condLen, name)
	}
	c := &conduit{
		name: name, index: i, prefix: subPrefix(t.pool, t.condLen, i),
		nodes: map[string]*node{}, slots: newSlots(0, slotCount(t.condLen, t.nodeLen), nil),
		listed: e.nspLists(name),
	}
	e.w.enqueue(store.Op{Kind: store.OpPut, Record: store.Record{Key: t.conduitKey(name), Prefix: c.prefix}})
	t.conduits[name] = c
	e.log.Info("conduit created", "family", t.family, "conduit", name, "prefix", c.prefix)
	return nil
}

// createNode is called with t.mu held for reading.
func (e *Engine) createNode(t *trench, c *conduit, name string, now int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[name] != nil {
		return nil
	}
	i, ok := c.slots.take()
	if !ok {
		return fmt.Errorf("%w: conduit %q (%s) is full (no free /%d for node %q)", ErrExhausted, c.name, c.prefix, t.nodeLen, name)
	}
	n := &node{name: name, index: i, prefix: subPrefix(c.prefix, t.nodeLen, i), children: map[string]*child{}, slots: t.childSlots(nil)}
	n.updated.Store(now)
	n.flushed.Store(now)
	n.seq = e.w.enqueue(store.Op{Kind: store.OpPut, Record: store.Record{
		Key: t.nodeKey(c.name, name), Prefix: n.prefix, Updated: time.Unix(0, now),
	}})
	c.nodes[name] = n
	e.log.Info("node created", "family", t.family, "conduit", c.name, "node", name, "prefix", n.prefix)
	return nil
}

// Release frees the named child. Releasing something that does not exist
// (child, node or conduit) succeeds and creates nothing. It returns once the
// removal is durable.
//
// A Release whose ctx is done by the time it would remove the child (its
// caller gave up: a new request of the same connection cancelled it) removes
// nothing. Its caller may already have allocated the child again, in a call
// that overtook this one, and holds the address.
func (e *Engine) Release(ctx context.Context, s Subnet, childName string) error {
	t, err := e.validate(s, childName)
	if err != nil {
		return err
	}
	seq, ok, err := e.release(ctx, t, s.Conduit, s.Node, childName)
	if err != nil || !ok {
		return err
	}
	return e.w.wait(ctx, seq)
}

func (e *Engine) release(ctx context.Context, t *trench, cname, nname, chname string) (uint64, bool, error) {
	seq, c, ok, err := e.releaseChild(ctx, t, cname, nname, chname)
	if ok && c != nil {
		e.reapDrained(t, c)
	}
	return seq, ok, err
}

// releaseChild removes the child, unless ctx is done; it returns its
// conduit too when the conduit is draining. ctx is checked under the
// node's lock, where an Allocate of the child reads it: an Allocate that
// the caller sent after giving up on this call either comes after the
// removal or finds ctx done.
func (e *Engine) releaseChild(ctx context.Context, t *trench, cname, nname, chname string) (uint64, *conduit, bool, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	c := t.conduits[cname]
	if c == nil {
		return 0, nil, false, nil
	}
	drained := c
	if !c.draining {
		drained = nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := c.nodes[nname]
	if n == nil {
		return 0, nil, false, nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	ch := n.children[chname]
	if ch == nil {
		return 0, nil, false, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, nil, false, err
	}
	delete(n.children, chname)
	n.slots.put(ch.index)
	e.log.Debug("released", "family", t.family, "conduit", cname, "node", nname, "child", chname, "address", ch.addr)
	return e.w.enqueue(store.Op{Kind: store.OpDelete, Record: store.Record{Key: t.childKey(cname, nname, chname)}}), drained, true, nil
}

// Sync waits until every change queued so far (removals and lease flushes
// included) is durable.
func (e *Engine) Sync(ctx context.Context) error {
	return e.w.wait(ctx, e.w.last())
}
