package ipam

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// BridgeChild is the child name whose lease never expires on its own: it goes
// only with its node.
const BridgeChild = "bridge"

// trench is the root of one family. mu guards conduits, the conduit slots and
// every conduit's listed and draining flags; it is held for reading by everything that
// works below a conduit, so removing a conduit (write lock) excludes them.
type trench struct {
	name     string
	family   Family
	pool     netip.Prefix
	condLen  int
	nodeLen  int
	childLen int

	mu       sync.RWMutex
	conduits map[string]*conduit
	slots    *slots
}

// conduit: mu guards nodes and the node slots; it is held for reading by
// everything that works below a node, so removing a node (write lock)
// excludes them.
type conduit struct {
	name   string
	prefix netip.Prefix
	index  uint64
	listed bool // the configuration server lists it (or it was loaded)
	// draining: the configuration server dropped it. Its allocations are
	// kept and renewed, none is added; it goes when its last node does.
	draining bool

	mu    sync.RWMutex
	nodes map[string]*node
	slots *slots
}

// node: mu guards children and the child slots.
type node struct {
	name   string
	prefix netip.Prefix
	index  uint64
	lease

	mu       sync.RWMutex
	children map[string]*child
	slots    *slots
}

type child struct {
	name  string
	addr  netip.Addr
	index uint64
	lease
}

// lease is the renewal state of a node or child. updated is in memory (unix
// nanoseconds); flushed is the value last queued to the store; seq is the
// writer sequence number of the record's creation.
type lease struct {
	seq     uint64
	updated atomic.Int64
	flushed atomic.Int64
}

// renew moves the lease time forward to now, never back: concurrent
// renewals (requests for one child, a node's GC extension) keep the newest.
func (l *lease) renew(now int64) {
	for {
		cur := l.updated.Load()
		if cur >= now || l.updated.CompareAndSwap(cur, now) {
			return
		}
	}
}

func (t *trench) key() store.Key {
	return store.Key{Level: store.LevelTrench, Trench: t.name, Family: uint8(t.family)}
}

func (t *trench) conduitKey(c string) store.Key {
	k := t.key()
	k.Level, k.Conduit = store.LevelConduit, c
	return k
}

func (t *trench) nodeKey(c, n string) store.Key {
	k := t.conduitKey(c)
	k.Level, k.Node = store.LevelNode, n
	return k
}

func (t *trench) childKey(c, n, ch string) store.Key {
	k := t.nodeKey(c, n)
	k.Level, k.Child = store.LevelChild, ch
	return k
}

// childSlots is the index range of usable children in a node: never the
// first or the last address.
func (t *trench) childSlots(used []uint64) *slots {
	return newSlots(1, slotCount(t.nodeLen, t.childLen)-1, used)
}
