package meridio

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/store"
)

func (r *reader) skipLevel(x row, reason string) {
	r.sum.skip(x, reason)
	r.skipped[x.id] = true
}

func (r *reader) addConduit(x row) error {
	t := r.trenches[x.parent]
	if t == nil {
		r.skipLevel(x, "its trench root was skipped")
		return nil
	}
	if err := ipam.ValidateName("conduit", x.name, false); err != nil {
		r.skipLevel(x, err.Error())
		return nil
	}
	p, ok := subnet(x.cidr, t.Geometry.Pool, t.Geometry.ConduitLength)
	switch {
	case !ok:
		r.skipLevel(x, fmt.Sprintf("not a /%d inside %s", t.Geometry.ConduitLength, t.Geometry.Pool))
		return nil
	case t.names[x.name] || t.cidrs[p]:
		r.skipLevel(x, "a second conduit of that name or subnet")
		return nil
	}
	t.names[x.name], t.cidrs[p] = true, true
	t.Conduits++
	r.conduits[x.id] = &conduitState{trench: t, name: x.name, prefix: p, names: map[string]bool{}, cidrs: map[netip.Prefix]bool{}}
	return r.emit(store.Record{
		Key:    store.Key{Level: store.LevelConduit, Trench: t.Name, Family: uint8(t.Family), Conduit: x.name},
		Prefix: p,
	})
}

func (r *reader) addNode(x row) error {
	c := r.conduits[x.parent]
	if c == nil {
		r.skipLevel(x, "its conduit was skipped")
		return nil
	}
	t := c.trench
	if err := ipam.ValidateName("node", x.name, true); err != nil {
		r.skipLevel(x, err.Error())
		return nil
	}
	p, ok := subnet(x.cidr, c.prefix, t.Geometry.NodeLength)
	switch {
	case !ok:
		r.skipLevel(x, fmt.Sprintf("not a /%d inside the conduit's %s", t.Geometry.NodeLength, c.prefix))
		return nil
	case c.names[x.name] || c.cidrs[p]:
		r.skipLevel(x, "a second node of that name or subnet")
		return nil
	}
	c.names[x.name], c.cidrs[p] = true, true
	t.Nodes++
	r.nodes[x.id] = &nodeState{conduit: c, name: x.name, prefix: p, names: map[string]bool{}, addrs: map[netip.Addr]bool{}}
	return r.emit(store.Record{
		Key:    store.Key{Level: store.LevelNode, Trench: t.Name, Family: uint8(t.Family), Conduit: c.name, Node: x.name},
		Prefix: p, Updated: r.lease(x, false),
	})
}

// lease is the lease time a node or child keeps: its own, or the
// heartbeat if it has none or is not expirable (Meridio renews those at
// its start). The bridge keeps its own time whatever its flag.
func (r *reader) lease(x row, bridge bool) time.Time {
	if !x.updated.IsZero() && (x.expirable || bridge) {
		return x.updated
	}
	r.sum.Renewed++
	return r.sum.Heartbeat
}

// children streams every row below the third level.
func (r *reader) children(ctx context.Context) error {
	rows, err := r.db.QueryContext(ctx, selectRows+" WHERE NOT "+rootCond)
	if err != nil {
		return r.damaged(err)
	}
	defer rows.Close()
	for rows.Next() {
		x, err := scanRow(rows)
		if err != nil {
			return r.damaged(err)
		}
		if r.conduits[x.id] != nil || r.nodes[x.id] != nil || r.skipped[x.id] {
			continue
		}
		if err := r.addChild(x); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return r.damaged(err)
	}
	return nil
}

func (r *reader) addChild(x row) error {
	n := r.nodes[x.parent]
	if n == nil {
		reason := "its parent is not a node"
		if r.skipped[x.parent] {
			reason = "its node was skipped"
		}
		r.sum.skip(x, reason)
		return nil
	}
	t := n.conduit.trench
	if err := ipam.ValidateName("child", x.name, false); err != nil {
		r.sum.skip(x, err.Error())
		return nil
	}
	p, ok := subnet(x.cidr, n.prefix, n.prefix.Addr().BitLen())
	switch {
	case !ok:
		r.sum.skip(x, fmt.Sprintf("not a single address inside the node's %s", n.prefix))
		return nil
	case p.Addr() == n.prefix.Addr() || p.Addr() == lastAddr(n.prefix):
		r.sum.skip(x, "the first or last address of its node (never handed out)")
		return nil
	case n.duplicate(x, p):
		r.sum.skip(x, "a second child of that name or address")
		return nil
	}
	t.Children++
	return r.emit(store.Record{
		Key: store.Key{Level: store.LevelChild, Trench: t.Name, Family: uint8(t.Family),
			Conduit: n.conduit.name, Node: n.name, Child: x.name},
		Prefix: p, Updated: r.lease(x, x.name == ipam.BridgeChild),
	})
}

// duplicate reports whether n already has a child of x's name or address
// p, and remembers them otherwise. Meridio's primary key (id, which is
// <name>-<node id>) and unique index (cidr under a parent) already make the
// rows that follow Meridio's naming and write the address canonically
// unique, so only the others are remembered: the import of a large
// database holds no set of all its children.
func (n *nodeState) duplicate(x row, p netip.Prefix) bool {
	if x.id == x.name+"-"+x.parent && x.cidr == p.String() {
		return false
	}
	if n.names[x.name] || n.addrs[p.Addr()] {
		return true
	}
	n.names[x.name], n.addrs[p.Addr()] = true, true
	return false
}

// subnet parses cidr and checks that it is a canonical /bits inside parent.
func subnet(cidr string, parent netip.Prefix, bits int) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(strings.TrimSpace(cidr))
	if err != nil || p.Bits() != bits || p.Masked() != p || p.Addr().Is4() != parent.Addr().Is4() || !parent.Contains(p.Addr()) {
		return netip.Prefix{}, false
	}
	return p, true
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
