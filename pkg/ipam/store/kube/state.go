package kube

import (
	"fmt"
	"maps"
	"net/netip"
	"time"

	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// nodeID names a node subnet in a trench family.
type nodeID struct{ conduit, node string }

// pool is the cached content of an IPAMPool and the resourceVersion it was
// read or last written with ("" while it is not on the server).
type pool struct {
	name, rv         string
	family           uint8
	prefix           netip.Prefix
	condLen, nodeLen uint8
	heartbeat        time.Time
	servedBy         string
	conduits         map[string]netip.Prefix
	nodes            map[nodeID]netip.Prefix
}

func (p *pool) clone() *pool {
	c := *p
	c.conduits = maps.Clone(p.conduits)
	c.nodes = maps.Clone(p.nodes)
	return &c
}

// block is the cached content of an IPAMBlock.
type block struct {
	name, rv string
	family   uint8
	id       nodeID
	prefix   netip.Prefix
	renewed  time.Time
	children map[string]lease
}

// lease is a child's address and its last persisted renewal.
type lease struct {
	prefix  netip.Prefix
	renewed time.Time
}

func (b *block) clone() *block {
	c := *b
	c.children = maps.Clone(b.children)
	return &c
}

// family is what the store holds of one trench family.
type family struct {
	pool   *pool             // nil: no pool object
	blocks map[nodeID]*block // the blocks the pool's index names
}

// state is the store's view of the server: every object of the trench, with
// the version it was last seen at. The engine's memory is built from it.
type state struct {
	trench   string
	identity string // written as a new pool's servedBy
	families map[uint8]*family
	// orphans are blocks no index entry names (a record changed by hand):
	// kept by name so that a new block of the same prefix replaces them
	// instead of failing to be created.
	orphans map[string]*block
}

func newState(trench string) *state {
	return &state{trench: trench, families: map[uint8]*family{
		4: {blocks: map[nodeID]*block{}}, 6: {blocks: map[nodeID]*block{}},
	}, orphans: map[string]*block{}}
}

// deletion is an object to delete, at the version last seen.
type deletion struct {
	resource int // poolKind or blockKind
	name, rv string
	family   uint8
	id       nodeID
}

const (
	poolKind = iota
	blockKind
)

// change is what a batch of ops does to the state: the objects to delete,
// and the new content of every pool and block it changed (nil: deleted).
type change struct {
	s         *state
	deletes   []deletion
	pools     map[uint8]*pool
	blocks    map[uint8]map[nodeID]*block
	dirtyPool map[uint8]bool
	dirty     map[uint8]map[nodeID]bool
}

func (s *state) begin() *change {
	return &change{
		s: s, pools: map[uint8]*pool{}, blocks: map[uint8]map[nodeID]*block{4: {}, 6: {}},
		dirtyPool: map[uint8]bool{}, dirty: map[uint8]map[nodeID]bool{4: {}, 6: {}},
	}
}

// pool returns the working copy of a family's pool (nil if there is none).
func (c *change) pool(f uint8) *pool {
	if p, ok := c.pools[f]; ok {
		return p
	}
	p := c.s.families[f].pool
	if p != nil {
		p = p.clone()
	}
	c.pools[f] = p
	return p
}

// block returns the working copy of a node's block (nil if there is none).
func (c *change) block(f uint8, id nodeID) *block {
	if b, ok := c.blocks[f][id]; ok {
		return b
	}
	b := c.s.families[f].blocks[id]
	if b != nil {
		b = b.clone()
	}
	c.blocks[f][id] = b
	return b
}

// removeBlock deletes a node's block, if it exists.
func (c *change) removeBlock(f uint8, id nodeID) {
	b := c.block(f, id)
	if b == nil {
		return
	}
	if b.rv != "" {
		c.deletes = append(c.deletes, deletion{resource: blockKind, name: b.name, rv: b.rv, family: f, id: id})
	}
	c.blocks[f][id] = nil
	delete(c.dirty[f], id)
}

// newBlock starts the block of a node subnet; an orphan of the same name
// is taken over at its version.
func (c *change) newBlock(f uint8, id nodeID, p netip.Prefix) *block {
	name := blockName(c.s.trench, f, p)
	b := &block{name: name, family: f, id: id, prefix: p, children: map[string]lease{}}
	if o := c.s.orphans[name]; o != nil {
		b.rv = o.rv
	}
	c.blocks[f][id] = b
	c.dirty[f][id] = true
	return b
}

// apply records one op.
func (c *change) apply(op store.Op) error {
	k := op.Record.Key
	if k.Family != 4 && k.Family != 6 {
		return fmt.Errorf("record %v: family %d", k, k.Family)
	}
	if k.Trench != c.s.trench {
		return fmt.Errorf("record %v: trench %q is not this store's %q", k, k.Trench, c.s.trench)
	}
	switch op.Kind {
	case store.OpPut:
		return c.put(op.Record)
	case store.OpDelete:
		c.remove(k)
		return nil
	}
	return fmt.Errorf("record %v: unknown op %d", k, op.Kind)
}

func (c *change) put(r store.Record) error {
	k, f := r.Key, r.Key.Family
	if k.Level == store.LevelTrench {
		p := c.pool(f)
		if p == nil {
			p = &pool{name: poolName(c.s.trench, f), family: f, servedBy: c.s.identity, conduits: map[string]netip.Prefix{}, nodes: map[nodeID]netip.Prefix{}}
			c.pools[f] = p
		}
		p.prefix, p.condLen, p.nodeLen, p.heartbeat = r.Prefix, r.ConduitLength, r.NodeLength, r.Updated
		c.dirtyPool[f] = true
		return nil
	}
	p := c.pool(f)
	if p == nil {
		return fmt.Errorf("record %v: its trench has no record", k)
	}
	id := nodeID{k.Conduit, k.Node}
	switch k.Level {
	case store.LevelConduit:
		if p.conduits[k.Conduit] != r.Prefix {
			p.conduits[k.Conduit] = r.Prefix
			c.dirtyPool[f] = true
		}
	case store.LevelNode:
		if _, ok := p.conduits[k.Conduit]; !ok {
			return fmt.Errorf("record %v: its conduit has no record", k)
		}
		if p.nodes[id] != r.Prefix {
			p.nodes[id] = r.Prefix
			c.dirtyPool[f] = true
		}
		b := c.block(f, id)
		if b != nil && b.prefix != r.Prefix {
			c.removeBlock(f, id)
			b = nil
		}
		if b == nil {
			b = c.newBlock(f, id, r.Prefix)
		}
		if !b.renewed.Equal(r.Updated) {
			b.renewed = r.Updated
			c.dirty[f][id] = true
		}
	case store.LevelChild:
		b := c.block(f, id)
		if b == nil {
			np, ok := p.nodes[id]
			if !ok {
				return fmt.Errorf("record %v: its node has no record", k)
			}
			b = c.newBlock(f, id, np)
		}
		l := lease{prefix: r.Prefix, renewed: r.Updated}
		if old, ok := b.children[k.Child]; !ok || old.prefix != l.prefix || !old.renewed.Equal(l.renewed) {
			b.children[k.Child] = l
			c.dirty[f][id] = true
		}
	default:
		return fmt.Errorf("record %v: unknown level", k)
	}
	return nil
}

func (c *change) remove(k store.Key) {
	f := k.Family
	id := nodeID{k.Conduit, k.Node}
	switch k.Level {
	case store.LevelTrench:
		for id := range c.s.families[f].blocks {
			c.removeBlock(f, id)
		}
		for id, b := range c.blocks[f] {
			if b != nil {
				c.removeBlock(f, id)
			}
		}
		if p := c.pool(f); p != nil {
			if p.rv != "" {
				c.deletes = append(c.deletes, deletion{resource: poolKind, name: p.name, rv: p.rv, family: f})
			}
			c.pools[f] = nil
			delete(c.dirtyPool, f)
		}
	case store.LevelConduit:
		p := c.pool(f)
		if p == nil {
			return
		}
		if _, ok := p.conduits[k.Conduit]; ok {
			delete(p.conduits, k.Conduit)
			c.dirtyPool[f] = true
		}
		for id := range p.nodes {
			if id.conduit == k.Conduit {
				c.removeNode(f, p, id)
			}
		}
	case store.LevelNode:
		if p := c.pool(f); p != nil {
			c.removeNode(f, p, id)
		}
	case store.LevelChild:
		b := c.block(f, id)
		if b == nil {
			return
		}
		if _, ok := b.children[k.Child]; ok {
			delete(b.children, k.Child)
			c.dirty[f][id] = true
		}
	}
}

func (c *change) removeNode(f uint8, p *pool, id nodeID) {
	if _, ok := p.nodes[id]; ok {
		delete(p.nodes, id)
		c.dirtyPool[f] = true
	}
	c.removeBlock(f, id)
}
