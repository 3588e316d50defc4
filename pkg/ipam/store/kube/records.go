package kube

import (
	"bytes"
	"log/slog"
	"slices"

	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// adopt installs the objects listed from the server: pools by family,
// blocks under the index entry that names them; a block that no entry
// names (or names with another prefix) is an orphan, logged and not loaded.
func (s *state) adopt(pools []*pool, blocks []*block, log *slog.Logger) {
	for _, p := range pools {
		s.families[p.family].pool = p
	}
	for _, b := range blocks {
		p := s.families[b.family].pool
		if p == nil || p.nodes[b.id] != b.prefix {
			log.Warn("IPAMBlock is not in its pool's index; its addresses are not loaded", "name", b.name,
				"conduit", b.id.conduit, "node", b.id.node, "prefix", b.prefix)
			s.orphans[b.name] = b
			continue
		}
		s.families[b.family].blocks[b.id] = b
	}
}

// records returns every record the state holds, in key order.
func (s *state) records() []store.Record {
	var out []store.Record
	for _, f := range []uint8{4, 6} {
		fam := s.families[f]
		p := fam.pool
		if p == nil {
			continue
		}
		key := store.Key{Trench: s.trench, Family: f}
		k := key
		k.Level = store.LevelTrench
		out = append(out, store.Record{Key: k, Prefix: p.prefix, Updated: p.heartbeat, ConduitLength: p.condLen, NodeLength: p.nodeLen})
		for name, pfx := range p.conduits {
			k := key
			k.Level, k.Conduit = store.LevelConduit, name
			out = append(out, store.Record{Key: k, Prefix: pfx})
		}
		for id, pfx := range p.nodes {
			k := key
			k.Level, k.Conduit, k.Node = store.LevelNode, id.conduit, id.node
			r := store.Record{Key: k, Prefix: pfx}
			if b := fam.blocks[id]; b != nil {
				r.Updated = b.renewed
				out = appendChildren(out, k, b)
			}
			out = append(out, r)
		}
	}
	type keyed struct {
		key []byte
		r   store.Record
	}
	sorted := make([]keyed, len(out))
	for i, r := range out {
		sorted[i] = keyed{store.EncodeKey(r.Key), r}
	}
	slices.SortFunc(sorted, func(a, b keyed) int { return bytes.Compare(a.key, b.key) })
	for i := range sorted {
		out[i] = sorted[i].r
	}
	return out
}

func appendChildren(out []store.Record, node store.Key, b *block) []store.Record {
	for name, l := range b.children {
		k := node
		k.Level, k.Child = store.LevelChild, name
		out = append(out, store.Record{Key: k, Prefix: l.prefix, Updated: l.renewed})
	}
	return out
}
