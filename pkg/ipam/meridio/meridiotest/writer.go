// Package meridiotest writes databases with the layout of Meridio's IPAM
// (one table prefixes, as Meridio v1.2.8 leaves it) for the tests of the
// import: single rows, or whole trenches of conduits, nodes and children
// whose addresses the test then expects back.
package meridiotest

import (
	"database/sql"
	"fmt"
	"net/netip"
	"testing"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Schema is the DDL of Meridio's table and indexes, as observed.
const Schema = "CREATE TABLE `prefixes` (`id` text,`name` text,`cidr` text,`parent_id` text,`updated_at` datetime," +
	"`expirable` numeric DEFAULT false,PRIMARY KEY (`id`),CONSTRAINT `fk_prefixes_parent` FOREIGN KEY (`parent_id`) " +
	"REFERENCES `prefixes`(`id`));" +
	"CREATE INDEX `idx_prefixes_parent_id` ON `prefixes`(`parent_id`);" +
	"CREATE INDEX `idx_prefixes_name` ON `prefixes`(`name`);" +
	"CREATE INDEX `idx_prefixes_expirable` ON `prefixes`(`expirable`);" +
	"CREATE INDEX `idx_prefixes_updated_at` ON `prefixes`(`updated_at`);" +
	"CREATE UNIQUE INDEX `idx_parent_id_cidr` ON `prefixes`(`cidr`,`parent_id`);"

// TimeFormat is how Meridio's driver writes updated_at.
const TimeFormat = "2006-01-02 15:04:05.999999999-07:00"

// Writer adds rows to a new database in one transaction; Close commits.
type Writer struct {
	t    testing.TB
	db   *sql.DB
	tx   *sql.Tx
	stmt *sql.Stmt
}

// Create creates the database at path with Meridio's schema.
func Create(t testing.TB, path string) *Writer {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(Schema); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := tx.Prepare("INSERT INTO prefixes (id, name, cidr, parent_id, updated_at, expirable) VALUES (?, ?, ?, ?, ?, ?)")
	if err != nil {
		t.Fatal(err)
	}
	return &Writer{t: t, db: db, tx: tx, stmt: stmt}
}

// Row adds one row as given; a zero updated is NULL.
func (w *Writer) Row(id, name, cidr, parent string, updated time.Time, expirable bool) {
	w.t.Helper()
	var u any
	if !updated.IsZero() {
		u = updated.UTC().Format(TimeFormat)
	}
	exp := 0
	if expirable {
		exp = 1
	}
	if _, err := w.stmt.Exec(id, name, cidr, parent, u, exp); err != nil {
		w.t.Fatalf("insert %s: %v", id, err)
	}
}

// Trench adds a trench root (family 0 for IPv4, 1 for IPv6) and returns
// its id.
func (w *Writer) Trench(trench string, family int, pool string) string {
	id := fmt.Sprintf("%s-%d", trench, family)
	w.Row(id, id, pool, "", time.Time{}, false)
	return id
}

// Add adds a conduit, node or child below parent as Meridio names it
// (id <name>-<parent>): a conduit is never expirable, a node always, a
// child unless it is the bridge. It returns the id.
func (w *Writer) Add(parent, name, cidr string, updated time.Time, expirable bool) string {
	id := name + "-" + parent
	w.Row(id, name, cidr, parent, updated, expirable)
	return id
}

// Close commits and closes the database.
func (w *Writer) Close() {
	w.t.Helper()
	if err := w.stmt.Close(); err != nil {
		w.t.Fatal(err)
	}
	if err := w.tx.Commit(); err != nil {
		w.t.Fatal(err)
	}
	if err := w.db.Close(); err != nil {
		w.t.Fatal(err)
	}
}

// Child is a child row written by Populate.
type Child struct {
	Trench        string
	IPv6          bool
	Conduit, Node string
	Name          string
	Addr          netip.Addr
	NodeLength    int
}

// Spec is a trench of one family filled by Populate: Conduits conduits of
// Nodes nodes of Children children each (the bridge first), carved
// first-fit as Meridio does, every lease renewed at Updated.
type Spec struct {
	Trench                    string
	IPv6                      bool
	Pool                      string
	ConduitLength, NodeLength int
	Conduits, Nodes, Children int
	Updated                   time.Time
}

// Populate writes s and returns its children.
func (w *Writer) Populate(s Spec) []Child {
	w.t.Helper()
	fam := 0
	if s.IPv6 {
		fam = 1
	}
	pool := netip.MustParsePrefix(s.Pool)
	root := w.Trench(s.Trench, fam, s.Pool)
	var out []Child
	for c := 0; c < s.Conduits; c++ {
		cname := fmt.Sprintf("conduit-%d", c)
		cp := Sub(pool, s.ConduitLength, uint64(c))
		cid := w.Add(root, cname, cp.String(), time.Time{}, false)
		for n := 0; n < s.Nodes; n++ {
			nname := fmt.Sprintf("worker-%d", n)
			np := Sub(cp, s.NodeLength, uint64(n))
			nid := w.Add(cid, nname, np.String(), s.Updated, true)
			for ch := 0; ch < s.Children; ch++ {
				name := "bridge"
				if ch > 0 {
					name = fmt.Sprintf("target-%d-%s-proxy.%s.%s.ns-0-%s", (ch-1)/2, nname, cname, s.Trench, []string{"src", "dst"}[(ch-1)%2])
				}
				a := Sub(np, pool.Addr().BitLen(), uint64(ch+1))
				w.Add(nid, name, a.String(), s.Updated, name != "bridge")
				out = append(out, Child{Trench: s.Trench, IPv6: s.IPv6, Conduit: cname, Node: nname, Name: name, Addr: a.Addr(), NodeLength: s.NodeLength})
			}
		}
	}
	return out
}

// Sub is the i-th /bits subnet of p.
func Sub(p netip.Prefix, bits int, i uint64) netip.Prefix {
	b := p.Addr().AsSlice()
	// add i << (len-bits) to the address, byte by byte from the end
	shift := len(b)*8 - bits
	carry := uint64(0)
	for k := len(b) - 1; k >= 0; k-- {
		bitPos := (len(b) - 1 - k) * 8
		var add uint64
		if bitPos+8 > shift && bitPos-shift < 64 {
			if bitPos >= shift {
				add = (i >> (bitPos - shift)) & 0xff
			} else {
				add = (i << (shift - bitPos)) & 0xff
			}
		}
		sum := uint64(b[k]) + add + carry
		b[k] = byte(sum)
		carry = sum >> 8
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(a, bits)
}

// Open opens an existing database for Exec (in one transaction).
func Open(t testing.TB, path string) *Writer {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := tx.Prepare("SELECT 1")
	if err != nil {
		t.Fatal(err)
	}
	return &Writer{t: t, db: db, tx: tx, stmt: stmt}
}

// Exec runs SQL statements.
func (w *Writer) Exec(query string) {
	w.t.Helper()
	if _, err := w.tx.Exec(query); err != nil {
		w.t.Fatal(err)
	}
}
