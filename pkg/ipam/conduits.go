package ipam

import (
	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// SyncConduits applies a full conduit list of the configuration server for
// this IPAM's trench. A conduit is removed, with all its nodes and children,
// when it is not in the list and either
//   - the server listed it before (it was deleted), or
//   - it was loaded from the store at start (it may have been deleted while
//     the IPAM was down).
//
// A conduit created by Allocate that the server has never listed is kept: the
// server may simply lag behind a proxy, and removing it would pull addresses
// out from under live proxies; its nodes still expire through the GC, and it
// is reconciled once the server lists and later drops it, or at the next
// start. Conduits are not created from the list: Allocate creates them.
//
// Callers must only pass lists actually received from the server: nothing is
// ever removed because the server is unreachable.
// It returns the number of conduit subnets removed (one per family).
func (e *Engine) SyncConduits(names []string) (removed int) {
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[n] = struct{}{}
	}
	e.nspMu.Lock()
	e.nsp = set
	e.nspMu.Unlock()
	for _, t := range e.trenches {
		t.mu.Lock()
		for name, c := range t.conduits {
			if _, ok := set[name]; ok {
				c.listed = true
			} else if c.listed {
				e.removeConduitLocked(t, c)
				removed++
			}
		}
		t.mu.Unlock()
	}
	return removed
}

// RemoveConduit removes a conduit with all its nodes and children, in every
// family. Removing an unknown conduit does nothing.
func (e *Engine) RemoveConduit(name string) {
	for _, t := range e.trenches {
		t.mu.Lock()
		if c := t.conduits[name]; c != nil {
			e.removeConduitLocked(t, c)
		}
		t.mu.Unlock()
	}
}

// removeConduitLocked is called with t.mu held for writing, which excludes
// every operation below the conduit.
func (e *Engine) removeConduitLocked(t *trench, c *conduit) {
	delete(t.conduits, c.name)
	t.slots.put(c.index)
	e.w.enqueue(store.Op{Kind: store.OpDelete, Record: store.Record{Key: t.conduitKey(c.name)}})
	e.log.Info("conduit removed", "family", t.family, "conduit", c.name, "prefix", c.prefix, "nodes", len(c.nodes))
}

// nspLists reports whether the last list of the configuration server names
// the conduit.
func (e *Engine) nspLists(name string) bool {
	e.nspMu.Lock()
	defer e.nspMu.Unlock()
	_, ok := e.nsp[name]
	return ok
}
