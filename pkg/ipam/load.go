package ipam

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// load builds the in-memory index from the stored records of the served
// families, passed one at a time in key order by each (so that a large
// store is never held in memory twice), and returns the changes to queue:
// the removal of records that do not fit and the creation of missing trench
// records.
//
// Lease times are shifted by the time the IPAM was down (now minus the
// trench's last heartbeat): downtime does not count against a lease, while
// leases that were already stale before the IPAM stopped are collected by the
// first garbage collection at start.
//
// A stored trench keeps its pool and lengths even when the configuration
// changed (a warning is logged): existing conduits, nodes and children stay
// valid and no two prefixes can overlap.
func (e *Engine) load(each func(func(store.Record) error) error) ([]store.Op, error) {
	l := &loader{e: e, now: e.now()}
	if err := each(func(r store.Record) error {
		l.add(r)
		return nil
	}); err != nil {
		return nil, err
	}
	l.finish()
	for _, f := range []Family{IPv4, IPv6} {
		if fc := e.cfg.family(f); fc != nil && e.trenches[f] == nil {
			l.begin(f, nil)
			l.finish()
		}
	}
	return l.ops, nil
}

// loader loads the records of one trench family after the other (key order
// keeps a family's records together, its trench record first).
type loader struct {
	e   *Engine
	now time.Time
	ops []store.Op

	t         *trench // the family being loaded; nil between families
	shift     time.Duration
	condUsed  indexSet
	nodeUsed  map[*conduit]indexSet
	childUsed map[*node]indexSet
}

func (l *loader) add(r store.Record) {
	f := Family(r.Key.Family)
	if r.Key.Trench != l.e.cfg.Trench || l.e.cfg.family(f) == nil {
		return
	}
	if l.t == nil || l.t.family != f {
		l.finish()
		if r.Key.Level == store.LevelTrench {
			l.begin(f, &r)
			return
		}
		l.begin(f, nil)
	}
	l.record(r)
}

// begin starts loading family f, of the stored trench record root (nil if
// there is none).
func (l *loader) begin(f Family, root *store.Record) {
	e, fc := l.e, *l.e.cfg.family(f)
	t := &trench{
		name: e.cfg.Trench, family: f, pool: fc.Pool,
		condLen: fc.ConduitLength, nodeLen: fc.NodeLength, childLen: fc.Pool.Addr().BitLen(),
		conduits: map[string]*conduit{},
	}
	l.t, l.shift = t, 0
	l.condUsed, l.nodeUsed, l.childUsed = indexSet{}, map[*conduit]indexSet{}, map[*node]indexSet{}
	if root != nil && e.validStoredGeometry(f, root) {
		if root.Prefix != fc.Pool || int(root.ConduitLength) != fc.ConduitLength || int(root.NodeLength) != fc.NodeLength {
			e.log.Warn("configured pool differs from the stored one; keeping the stored one (delete the database to change it)",
				"family", f, "trench", t.name,
				"stored", geometry(root.Prefix, int(root.ConduitLength), int(root.NodeLength)),
				"configured", geometry(fc.Pool, fc.ConduitLength, fc.NodeLength))
		}
		t.pool, t.condLen, t.nodeLen = root.Prefix, int(root.ConduitLength), int(root.NodeLength)
		t.childLen = t.pool.Addr().BitLen()
		if !root.Updated.IsZero() && l.now.After(root.Updated) {
			l.shift = l.now.Sub(root.Updated)
		}
		return
	}
	l.ops = append(l.ops, store.Op{Kind: store.OpPut, Record: store.Record{
		Key: t.key(), Prefix: t.pool, Updated: l.now,
		ConduitLength: uint8(t.condLen), NodeLength: uint8(t.nodeLen),
	}})
}

func (l *loader) drop(r store.Record, why string) {
	l.e.log.Warn("dropping stored record", "key", r.Key, "prefix", r.Prefix, "reason", why)
	l.ops = append(l.ops, store.Op{Kind: store.OpDelete, Record: store.Record{Key: r.Key}})
}

// record adds one record below the trench being loaded; records come in
// key order, parents first.
func (l *loader) record(r store.Record) {
	t := l.t
	switch r.Key.Level {
	case store.LevelTrench:
		l.drop(r, "a second trench record")
	case store.LevelConduit:
		i, ok := subIndex(t.pool, t.condLen, r.Prefix)
		if !ok || !l.condUsed.add(i) {
			l.drop(r, "outside the pool or overlapping")
			return
		}
		t.conduits[r.Key.Conduit] = &conduit{name: r.Key.Conduit, prefix: r.Prefix, index: i, listed: true, nodes: map[string]*node{}}
	case store.LevelNode:
		c := t.conduits[r.Key.Conduit]
		if c == nil {
			l.drop(r, "no conduit")
			return
		}
		i, ok := subIndex(c.prefix, t.nodeLen, r.Prefix)
		if l.nodeUsed[c] == nil {
			l.nodeUsed[c] = indexSet{}
		}
		if !ok || !l.nodeUsed[c].add(i) {
			l.drop(r, "outside the conduit or overlapping")
			return
		}
		n := &node{name: r.Key.Node, prefix: r.Prefix, index: i, children: map[string]*child{}}
		n.loaded(r.Updated, l.shift)
		c.nodes[n.name] = n
	case store.LevelChild:
		var n *node
		if c := t.conduits[r.Key.Conduit]; c != nil {
			n = c.nodes[r.Key.Node]
		}
		if n == nil {
			l.drop(r, "no node")
			return
		}
		i, ok := subIndex(n.prefix, t.childLen, r.Prefix)
		if l.childUsed[n] == nil {
			l.childUsed[n] = indexSet{}
		}
		if !ok || i == 0 || i >= slotCount(t.nodeLen, t.childLen)-1 || !l.childUsed[n].add(i) {
			l.drop(r, "outside the node, reserved or overlapping")
			return
		}
		ch := &child{name: r.Key.Child, addr: r.Prefix.Addr(), index: i}
		ch.loaded(r.Updated, l.shift)
		n.children[ch.name] = ch
	}
}

// finish builds the free-slot sets of the trench being loaded and installs
// it in the engine.
func (l *loader) finish() {
	t := l.t
	if t == nil {
		return
	}
	t.slots = newSlots(0, slotCount(t.pool.Bits(), t.condLen), l.condUsed.list())
	for _, c := range t.conduits {
		c.slots = newSlots(0, slotCount(t.condLen, t.nodeLen), l.nodeUsed[c].list())
		for _, n := range c.nodes {
			n.slots = t.childSlots(l.childUsed[n].list())
		}
	}
	if l.shift > 0 {
		l.e.log.Info("leases extended by the downtime", "family", t.family, "downtime", l.shift.Round(time.Second))
	}
	l.e.trenches[t.family] = t
	l.t, l.condUsed, l.nodeUsed, l.childUsed = nil, nil, nil, nil
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
