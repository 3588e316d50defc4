package meridio

import (
	"context"
	"database/sql"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// Options are what Read needs besides the file.
type Options struct {
	// IPv4 and IPv6 are the configured geometries. Stored values win; a
	// configured length is used only where no stored row shows one (a
	// trench without conduits or nodes). Nil means Meridio's defaults.
	IPv4, IPv6 *ipam.FamilyConfig
	// Now is the lease time of a database that holds none (default
	// time.Now()).
	Now time.Time
}

func (o Options) geometry(f ipam.Family) ipam.FamilyConfig {
	switch {
	case f == ipam.IPv4 && o.IPv4 != nil:
		return *o.IPv4
	case f == ipam.IPv4:
		return ipam.DefaultIPv4
	case o.IPv6 != nil:
		return *o.IPv6
	}
	return ipam.DefaultIPv6
}

// Emit receives each record read; an error stops Read.
type Emit func(store.Record) error

// Read reads the Meridio database at path and passes every record to emit:
// conduits and nodes first, then the children as they are read (a large
// database is never held in memory), the trench roots last. A file that is
// not a readable Meridio database is a *ForeignError or *DamagedError,
// returned before anything is emitted.
func Read(ctx context.Context, path string, opts Options, emit Emit) (*Summary, error) {
	db, err := open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	r := &reader{db: db, opts: opts, emit: emit, sum: &Summary{Path: path},
		trenches: map[string]*trenchState{}, conduits: map[string]*conduitState{}, nodes: map[string]*nodeState{},
		skipped: map[string]bool{}}
	if err := r.read(ctx); err != nil {
		return nil, err
	}
	return r.sum, nil
}

type reader struct {
	db   *sql.DB
	opts Options
	emit Emit
	sum  *Summary

	trenches map[string]*trenchState // by row id
	conduits map[string]*conduitState
	nodes    map[string]*nodeState
	skipped  map[string]bool // ids of skipped rows of the first three levels
}

type trenchState struct {
	*Trench
	names map[string]bool
	cidrs map[netip.Prefix]bool
}

type conduitState struct {
	trench *trenchState
	name   string
	prefix netip.Prefix
	names  map[string]bool
	cidrs  map[netip.Prefix]bool
}

type nodeState struct {
	conduit *conduitState
	name    string
	prefix  netip.Prefix
	names   map[string]bool
	addrs   map[netip.Addr]bool
}

func (r *reader) read(ctx context.Context) error {
	hb, err := r.heartbeat(ctx)
	if err != nil {
		return err
	}
	r.sum.Heartbeat = hb
	roots, err := r.rows(ctx, rootsOnly)
	if err != nil {
		return err
	}
	conduits, err := r.rows(ctx, conduitsOnly)
	if err != nil {
		return err
	}
	nodes, err := r.rows(ctx, nodesOnly)
	if err != nil {
		return err
	}
	r.addTrenches(roots, conduits, nodes)
	for _, c := range conduits {
		if err := r.addConduit(c); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		if err := r.addNode(n); err != nil {
			return err
		}
	}
	if err := r.children(ctx); err != nil {
		return err
	}
	for _, root := range roots {
		t := r.trenches[root.id]
		if t == nil {
			continue
		}
		g := t.Geometry
		if err := r.emit(store.Record{
			Key:    store.Key{Level: store.LevelTrench, Trench: t.Name, Family: uint8(t.Family)},
			Prefix: g.Pool, Updated: hb, ConduitLength: uint8(g.ConduitLength), NodeLength: uint8(g.NodeLength),
		}); err != nil {
			return err
		}
		r.sum.Trenches = append(r.sum.Trenches, *t.Trench)
	}
	return nil
}

// heartbeat is the newest lease time stored (Options.Now if none).
func (r *reader) heartbeat(ctx context.Context) (time.Time, error) {
	rows, err := r.db.QueryContext(ctx, "SELECT CAST(updated_at AS TEXT) FROM prefixes WHERE updated_at IS NOT NULL")
	if err != nil {
		return time.Time{}, r.damaged(err)
	}
	defer rows.Close()
	var newest time.Time
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return time.Time{}, r.damaged(err)
		}
		if t := parseTime(s); t.After(newest) {
			newest = t
		}
	}
	if err := rows.Err(); err != nil {
		return time.Time{}, r.damaged(err)
	}
	if newest.IsZero() {
		newest = r.opts.Now.UTC()
	}
	return newest, nil
}

func (r *reader) damaged(err error) error {
	return &DamagedError{Path: r.sum.Path, Problem: err.Error()}
}

// rows reads all rows of query (the first three levels are small).
func (r *reader) rows(ctx context.Context, query string) ([]row, error) {
	rows, err := r.db.QueryContext(ctx, query)
	if err != nil {
		return nil, r.damaged(err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		x, err := scanRow(rows)
		if err != nil {
			return nil, r.damaged(err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, r.damaged(err)
	}
	return out, nil
}

// addTrenches takes the trench roots, with the lengths their conduit and
// node rows show.
func (r *reader) addTrenches(roots, conduits, nodes []row) {
	parentOf := map[string]string{}
	for _, c := range conduits {
		parentOf[c.id] = c.parent
	}
	condLens, nodeLens := map[string]map[int]int{}, map[string]map[int]int{}
	count := func(m map[string]map[int]int, root, cidr string) {
		if p, err := netip.ParsePrefix(cidr); err == nil {
			if m[root] == nil {
				m[root] = map[int]int{}
			}
			m[root][p.Bits()]++
		}
	}
	for _, c := range conduits {
		count(condLens, c.parent, c.cidr)
	}
	for _, n := range nodes {
		count(nodeLens, parentOf[n.parent], n.cidr)
	}
	for _, root := range roots {
		t, reason := r.trench(root, condLens[root.id], nodeLens[root.id])
		if t == nil {
			r.sum.skip(root, reason)
			r.skipped[root.id] = true
			continue
		}
		r.trenches[root.id] = t
	}
}

func (r *reader) trench(root row, condLens, nodeLens map[int]int) (*trenchState, string) {
	name, family, ok := splitRootName(root.name)
	if !ok {
		return nil, "a trench root is named <trench>-0 (IPv4) or <trench>-1 (IPv6)"
	}
	if err := ipam.ValidateName("trench", name, false); err != nil {
		return nil, err.Error()
	}
	pool, err := netip.ParsePrefix(root.cidr)
	if err != nil || pool.Addr().Is4() != (family == ipam.IPv4) || pool.Addr().Is4In6() {
		return nil, fmt.Sprintf("the pool is not an %s CIDR", family)
	}
	g := r.opts.geometry(family)
	g.Pool = pool.Masked()
	t := &trenchState{Trench: &Trench{Name: name, Family: family}, names: map[string]bool{}, cidrs: map[netip.Prefix]bool{}}
	if l, ok := mostCommon(condLens); ok {
		g.ConduitLength, t.StoredConduitLength = l, true
	}
	if l, ok := mostCommon(nodeLens); ok {
		g.NodeLength, t.StoredNodeLength = l, true
	}
	if err := g.Validate(); err != nil {
		return nil, fmt.Sprintf("geometry %s conduit /%d node /%d: %v", g.Pool, g.ConduitLength, g.NodeLength, err)
	}
	for _, other := range r.trenches {
		if other.Name == name && other.Family == family {
			return nil, "a second root of the same trench and family"
		}
	}
	t.Geometry = g
	return t, ""
}

// splitRootName splits "<trench>-<0|1>".
func splitRootName(s string) (string, ipam.Family, bool) {
	i := strings.LastIndexByte(s, '-')
	if i <= 0 {
		return "", 0, false
	}
	switch s[i+1:] {
	case "0":
		return s[:i], ipam.IPv4, true
	case "1":
		return s[:i], ipam.IPv6, true
	}
	return "", 0, false
}

// mostCommon returns the length most rows have (the shortest of a tie).
func mostCommon(lens map[int]int) (int, bool) {
	best, n := 0, 0
	for l, c := range lens {
		if c > n || (c == n && l < best) {
			best, n = l, c
		}
	}
	return best, n > 0
}

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
