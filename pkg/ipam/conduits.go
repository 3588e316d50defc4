package ipam

import (
	"fmt"

	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// ConduitChanges counts what one conduit list changed, in conduit subnets
// (one per family).
type ConduitChanges struct {
	// Draining: dropped by the list; kept, but no new allocations.
	Draining int
	// Revived: listed again while draining; whole again, same subnets.
	Revived int
	// Removed: draining and holding nothing any more.
	Removed int
}

// SyncConduits applies a full conduit list of the configuration server for
// this IPAM's trench. A conduit is drained, not deleted, when it is not in
// the list and either
//   - the server listed it before (it was deleted or renamed), or
//   - it was loaded from the store at start (it may have been deleted while
//     the IPAM was down).
//
// A draining conduit keeps every node and child it has: an address that a
// proxy may still hold is never handed to anyone else. Its existing children
// are renewed by Allocate as before; a new child or node is refused with
// ErrDraining. Its children go when released or when the GC collects their
// leases; a node goes with its last child, the conduit with its last node
// (and at once if it holds nothing). If the list names it again while it
// drains, it is revived whole: same subnets, same addresses. Draining is not
// stored: after a restart the first list drains it again.
//
// A conduit created by Allocate that the server has never listed is kept
// serving: the server may simply lag behind a proxy. Conduits are not
// created from the list: Allocate creates them.
//
// Callers must only pass lists actually received from the server: nothing is
// ever drained because the server is unreachable.
func (e *Engine) SyncConduits(names []string) ConduitChanges {
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[n] = struct{}{}
	}
	e.nspMu.Lock()
	e.nsp = set
	e.nspMu.Unlock()
	var ch ConduitChanges
	for _, t := range e.trenches {
		t.mu.Lock()
		for name, c := range t.conduits {
			_, listed := set[name]
			switch {
			case listed:
				c.listed = true
				if c.draining {
					c.draining = false
					ch.Revived++
					e.log.Info("conduit revived", "family", t.family, "conduit", name, "prefix", c.prefix, "nodes", len(c.nodes))
				}
			case c.listed && !c.draining:
				c.draining = true
				ch.Draining++
				e.log.Info("conduit draining: not in the configuration; allocations kept until released or expired, none added",
					"family", t.family, "conduit", name, "prefix", c.prefix, "nodes", len(c.nodes))
				if e.reapDrainedLocked(t, c) {
					ch.Removed++
				}
			}
		}
		t.mu.Unlock()
	}
	return ch
}

// RemoveConduit removes a conduit with all its nodes and children, in every
// family, at once, leased or not: a proxy that still holds one of its
// addresses is not told. The engine never calls it on its own (a conduit the
// configuration drops is drained, see SyncConduits); it is for tests and
// deliberate operator action. Removing an unknown conduit does nothing.
func (e *Engine) RemoveConduit(name string) {
	for _, t := range e.trenches {
		t.mu.Lock()
		if c := t.conduits[name]; c != nil {
			e.removeConduitLocked(t, c)
		}
		t.mu.Unlock()
	}
}

// reapDrained removes what a draining conduit no longer holds (see
// reapDrainedLocked) and reports whether the conduit went.
func (e *Engine) reapDrained(t *trench, c *conduit) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conduits[c.name] != c {
		return false
	}
	return e.reapDrainedLocked(t, c)
}

// reapDrainedLocked, for a draining conduit, removes the nodes that have no
// child left and then the conduit if it has no node left. It is called with
// t.mu held for writing, which excludes every operation below the conduit.
func (e *Engine) reapDrainedLocked(t *trench, c *conduit) bool {
	if !c.draining {
		return false
	}
	// c.mu and n.mu too: the metrics collector reads below the trench
	// without t.mu.
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, n := range c.nodes {
		n.mu.RLock()
		empty := len(n.children) == 0
		n.mu.RUnlock()
		if empty {
			e.removeNodeLocked(t, c, n)
			e.log.Info("node of a draining conduit removed: no allocation left", "family", t.family, "conduit", c.name, "node", name, "prefix", n.prefix)
		}
	}
	if len(c.nodes) > 0 {
		return false
	}
	e.removeConduitLocked(t, c)
	return true
}

// removeConduitLocked is called with t.mu held for writing, which excludes
// every operation below the conduit.
func (e *Engine) removeConduitLocked(t *trench, c *conduit) {
	delete(t.conduits, c.name)
	t.slots.put(c.index)
	e.w.enqueue(store.Op{Kind: store.OpDelete, Record: store.Record{Key: t.conduitKey(c.name)}})
	e.log.Info("conduit removed", "family", t.family, "conduit", c.name, "prefix", c.prefix, "nodes", len(c.nodes))
}

func drainingError(conduit string) error {
	return fmt.Errorf("%w: conduit %q is not in the configuration server's list: no new allocations in it; "+
		"its existing ones are kept until released or their leases end, and it serves again once listed", ErrDraining, conduit)
}

// draining counts the draining conduits of t.
func (t *trench) draining() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := 0
	for _, c := range t.conduits {
		if c.draining {
			n++
		}
	}
	return n
}

// nspLists reports whether the last list of the configuration server names
// the conduit.
func (e *Engine) nspLists(name string) bool {
	e.nspMu.Lock()
	defer e.nspMu.Unlock()
	_, ok := e.nsp[name]
	return ok
}
