package ipam

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// load builds the in-memory index from the stored records of the served
// families, queues the removal of records that do not fit (and the creation
// of missing trench records) and returns the sequence number to wait for.
//
// Lease times are shifted by the time the IPAM was down (now minus the
// trench's last heartbeat): downtime does not count against a lease, while
// leases that were already stale before the IPAM stopped are collected by the
// first garbage collection at start.
//
// A stored trench keeps its pool and lengths even when the configuration
// changed (a warning is logged): existing conduits, nodes and children stay
// valid and no two prefixes can overlap.
func (e *Engine) load(records []store.Record) uint64 {
	var seq uint64
	now := e.now()
	byFamily := map[Family][]store.Record{}
	for _, r := range records {
		if r.Key.Trench == e.cfg.Trench {
			f := Family(r.Key.Family)
			byFamily[f] = append(byFamily[f], r)
		}
	}
	for _, f := range []Family{IPv4, IPv6} {
		fc := e.cfg.family(f)
		if fc == nil {
			continue
		}
		t, s := e.loadTrench(f, *fc, byFamily[f], now)
		e.trenches[f] = t
		seq = max(seq, s)
	}
	return seq
}

func (e *Engine) loadTrench(f Family, fc FamilyConfig, records []store.Record, now time.Time) (*trench, uint64) {
	t := &trench{
		name: e.cfg.Trench, family: f, pool: fc.Pool,
		condLen: fc.ConduitLength, nodeLen: fc.NodeLength, childLen: fc.Pool.Addr().BitLen(),
		conduits: map[string]*conduit{},
	}
	var seq uint64
	var shift time.Duration
	var root *store.Record
	for i := range records {
		if records[i].Key.Level == store.LevelTrench {
			root = &records[i]
		}
	}
	if root != nil && e.validStoredGeometry(f, root) {
		if root.Prefix != fc.Pool || int(root.ConduitLength) != fc.ConduitLength || int(root.NodeLength) != fc.NodeLength {
			e.log.Warn("configured pool differs from the stored one; keeping the stored one (delete the database to change it)",
				"family", f, "trench", t.name,
				"stored", geometry(root.Prefix, int(root.ConduitLength), int(root.NodeLength)),
				"configured", geometry(fc.Pool, fc.ConduitLength, fc.NodeLength))
		}
		t.pool, t.condLen, t.nodeLen = root.Prefix, int(root.ConduitLength), int(root.NodeLength)
		if !root.Updated.IsZero() && now.After(root.Updated) {
			shift = now.Sub(root.Updated)
		}
	} else {
		seq = e.w.enqueue(store.Op{Kind: store.OpPut, Record: store.Record{
			Key: t.key(), Prefix: t.pool, Updated: now,
			ConduitLength: uint8(t.condLen), NodeLength: uint8(t.nodeLen),
		}})
	}

	drop := func(r store.Record, why string) {
		e.log.Warn("dropping stored record", "key", r.Key, "prefix", r.Prefix, "reason", why)
		seq = e.w.enqueue(store.Op{Kind: store.OpDelete, Record: store.Record{Key: r.Key}})
	}
	// Records come in key order, parents first; collect indices per parent.
	condUsed := indexSet{}
	nodeUsed := map[*conduit]indexSet{}
	childUsed := map[*node]indexSet{}
	for _, r := range records {
		switch r.Key.Level {
		case store.LevelConduit:
			i, ok := subIndex(t.pool, t.condLen, r.Prefix)
			if !ok || !condUsed.add(i) {
				drop(r, "outside the pool or overlapping")
				continue
			}
			t.conduits[r.Key.Conduit] = &conduit{name: r.Key.Conduit, prefix: r.Prefix, index: i, listed: true, nodes: map[string]*node{}}
		case store.LevelNode:
			c := t.conduits[r.Key.Conduit]
			if c == nil {
				drop(r, "no conduit")
				continue
			}
			i, ok := subIndex(c.prefix, t.nodeLen, r.Prefix)
			if nodeUsed[c] == nil {
				nodeUsed[c] = indexSet{}
			}
			if !ok || !nodeUsed[c].add(i) {
				drop(r, "outside the conduit or overlapping")
				continue
			}
			n := &node{name: r.Key.Node, prefix: r.Prefix, index: i, children: map[string]*child{}}
			n.loaded(r.Updated, shift)
			c.nodes[n.name] = n
		case store.LevelChild:
			var n *node
			if c := t.conduits[r.Key.Conduit]; c != nil {
				n = c.nodes[r.Key.Node]
			}
			if n == nil {
				drop(r, "no node")
				continue
			}
			i, ok := subIndex(n.prefix, t.childLen, r.Prefix)
			if childUsed[n] == nil {
				childUsed[n] = indexSet{}
			}
			if !ok || i == 0 || i >= slotCount(t.nodeLen, t.childLen)-1 || !childUsed[n].add(i) {
				drop(r, "outside the node, reserved or overlapping")
				continue
			}
			ch := &child{name: r.Key.Child, addr: r.Prefix.Addr(), index: i}
			ch.loaded(r.Updated, shift)
			n.children[ch.name] = ch
		}
	}
	t.slots = newSlots(0, slotCount(t.pool.Bits(), t.condLen), condUsed.list())
	for _, c := range t.conduits {
		c.slots = newSlots(0, slotCount(t.condLen, t.nodeLen), nodeUsed[c].list())
		for _, n := range c.nodes {
			n.slots = t.childSlots(childUsed[n].list())
		}
	}
	if shift > 0 {
		e.log.Info("leases extended by the downtime", "family", f, "downtime", shift.Round(time.Second))
	}
	return t, seq
}

// validStoredGeometry reports whether a stored trench record is usable.
func (e *Engine) validStoredGeometry(f Family, r *store.Record) bool {
	fc := FamilyConfig{Pool: r.Prefix, ConduitLength: int(r.ConduitLength), NodeLength: int(r.NodeLength)}
	if err := fc.Validate(); err != nil || r.Prefix.Addr().Is4() != (f == IPv4) {
		e.log.Error("stored trench record is invalid; using the configured pool", "family", f, "record", r, "error", err)
		return false
	}
	return true
}

// indexSet collects the taken indices of one parent while loading.
type indexSet map[uint64]struct{}

// add adds i and reports whether it was new.
func (s indexSet) add(i uint64) bool {
	if _, ok := s[i]; ok {
		return false
	}
	s[i] = struct{}{}
	return true
}

func (s indexSet) list() []uint64 {
	out := make([]uint64, 0, len(s))
	for i := range s {
		out = append(out, i)
	}
	return out
}

func geometry(p netip.Prefix, c, n int) string {
	return fmt.Sprintf("%s conduit /%d node /%d", p, c, n)
}

// loaded sets a lease read from the store, extended by the downtime. The
// extension makes the lease dirty, so that the next flush persists it before
// (in the same ordered queue) the heartbeat that no longer covers the
// downtime.
func (l *lease) loaded(stored time.Time, shift time.Duration) {
	l.updated.Store(stored.Add(shift).UnixNano())
	l.flushed.Store(stored.UnixNano())
}
