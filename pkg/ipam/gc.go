package ipam

import (
	"net/netip"
	"time"

	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// CollectGarbage removes every node whose lease, and the lease of every
// child in it, is older than the GC threshold, with all its children (the
// bridge included), and every child other than the bridge whose lease is
// older than the threshold. A node is never collected while one of its
// children is still leased (after a crash a node's lease, written behind,
// can look older than a child created after its last flush). In a draining
// conduit a node goes with its last child and the conduit with its last
// node. Locks are taken per conduit and per node, never for the whole run.
// It returns the number of nodes and children removed.
func (e *Engine) CollectGarbage() (nodes, children int) {
	cutoff := e.now().Add(-e.cfg.GCThreshold).UnixNano()
	for _, t := range e.trenches {
		for _, c := range t.conduitList() {
			n, ch, draining := e.collectConduit(t, c, cutoff)
			nodes += n
			children += ch
			if draining {
				e.reapDrained(t, c)
			}
		}
	}
	if nodes+children > 0 {
		e.log.Info("garbage collected", "nodes", nodes, "children", children)
	}
	return nodes, children
}

func (t *trench) conduitList() []*conduit {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]*conduit, 0, len(t.conduits))
	for _, c := range t.conduits {
		out = append(out, c)
	}
	return out
}

// collectConduit collects below c; it also reports whether c is draining.
func (e *Engine) collectConduit(t *trench, c *conduit, cutoff int64) (nodes, children int, draining bool) {
	// Holding t.mu for reading keeps c in the trench (or, if it was removed
	// before, makes the deletions below harmless no-ops queued after its
	// removal).
	t.mu.RLock()
	defer t.mu.RUnlock()
	draining = c.draining

	c.mu.Lock()
	for name, n := range c.nodes {
		if n.updated.Load() < cutoff && !n.childLeased(cutoff) {
			e.removeNodeLocked(t, c, n)
			e.log.Debug("node expired", "family", t.family, "conduit", c.name, "node", name, "prefix", n.prefix)
			nodes++
		}
	}
	list := make([]*node, 0, len(c.nodes))
	for _, n := range c.nodes {
		list = append(list, n)
	}
	c.mu.Unlock()

	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, n := range list {
		n.mu.Lock()
		for name, ch := range n.children {
			if name != BridgeChild && ch.updated.Load() < cutoff {
				delete(n.children, name)
				n.slots.put(ch.index)
				e.w.enqueue(store.Op{Kind: store.OpDelete, Record: store.Record{Key: t.childKey(c.name, n.name, name)}})
				e.log.Debug("child expired", "family", t.family, "conduit", c.name, "node", n.name, "child", name, "address", ch.addr)
				children++
			}
		}
		n.mu.Unlock()
	}
	return nodes, children, draining
}

// removeNodeLocked removes n and its children from c, whose lock is held
// for writing (and t's for reading).
func (e *Engine) removeNodeLocked(t *trench, c *conduit, n *node) {
	delete(c.nodes, n.name)
	c.slots.put(n.index)
	e.w.enqueue(store.Op{Kind: store.OpDelete, Record: store.Record{Key: t.nodeKey(c.name, n.name)}})
}

// childLeased reports whether a child of n was renewed at or after cutoff,
// and if so extends n's lease to the newest such renewal. It is called with
// the conduit's lock held for writing, which excludes changes to children.
func (n *node) childLeased(cutoff int64) bool {
	newest := int64(0)
	for _, ch := range n.children {
		newest = max(newest, ch.updated.Load())
	}
	if newest < cutoff {
		return false
	}
	n.renew(newest)
	return true
}

// FlushLeases queues the lease times renewed since the last flush, and the
// trench heartbeat, to the store (write-behind: it does not wait for the
// commit).
func (e *Engine) FlushLeases() {
	now := e.now()
	for _, t := range e.trenches {
		for _, c := range t.conduitList() {
			e.flushConduit(t, c)
		}
		e.w.enqueue(store.Op{Kind: store.OpPut, Record: store.Record{
			Key: t.key(), Prefix: t.pool, Updated: now,
			ConduitLength: uint8(t.condLen), NodeLength: uint8(t.nodeLen),
		}})
	}
}

func (e *Engine) flushConduit(t *trench, c *conduit) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	c.mu.RLock()
	defer c.mu.RUnlock()
	var ops []store.Op
	for _, n := range c.nodes {
		ops = ops[:0]
		if u, ok := n.dirty(); ok {
			ops = append(ops, leaseOp(t.nodeKey(c.name, n.name), n.prefix, u))
		}
		n.mu.RLock()
		for _, ch := range n.children {
			if u, ok := ch.dirty(); ok {
				ops = append(ops, leaseOp(t.childKey(c.name, n.name, ch.name), netip.PrefixFrom(ch.addr, t.childLen), u))
			}
		}
		// Queued under the node's lock: ordered before any later removal.
		if len(ops) > 0 {
			e.w.enqueue(ops...)
		}
		n.mu.RUnlock()
	}
}

// dirty returns the lease time to flush, if it changed since the last flush.
func (l *lease) dirty() (int64, bool) {
	u := l.updated.Load()
	if u == l.flushed.Load() {
		return 0, false
	}
	l.flushed.Store(u)
	return u, true
}

func leaseOp(k store.Key, p netip.Prefix, updated int64) store.Op {
	return store.Op{Kind: store.OpPut, Record: store.Record{Key: k, Prefix: p, Updated: time.Unix(0, updated)}}
}
