package meridio

import (
	"context"
	"database/sql"
	"net/netip"
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
	db, done, err := open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer done()
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
