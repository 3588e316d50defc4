package meridio

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"slices"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// columns are the columns of Meridio's prefixes table that the import reads.
var columns = []string{"id", "name", "cidr", "parent_id", "updated_at", "expirable"}

// Check checks, as Read does before it emits anything, that the file at
// path is a readable Meridio database: a *ForeignError or *DamagedError
// if not.
func Check(ctx context.Context, path string) error {
	db, done, err := open(ctx, path)
	if err != nil {
		return err
	}
	defer done()
	return db.Close()
}

// open opens the SQLite file at path read-only and checks that it is
// readable whole (PRAGMA quick_check) and has Meridio's prefixes table. A
// database with a companion file (a hot journal, a log) is read from a
// recovered copy instead: the original is never written. Call done after
// closing the database.
func open(ctx context.Context, path string) (*sql.DB, func(), error) {
	src, mode, done := path, "ro", func() {}
	if hasCompanion(path) {
		var err error
		if src, done, err = recoveredCopy(path); err != nil {
			return nil, nil, err
		}
		mode = "rw"
	}
	dsn := "file:" + (&url.URL{Path: src}).EscapedPath() + "?mode=" + mode
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		done()
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if err := check(ctx, db, path); err != nil {
		_ = db.Close()
		done()
		return nil, nil, err
	}
	return db, done, nil
}

func check(ctx context.Context, db *sql.DB, path string) error {
	var result string
	if err := db.QueryRowContext(ctx, "PRAGMA quick_check(1)").Scan(&result); err != nil {
		return &DamagedError{Path: path, Problem: err.Error()}
	}
	if result != "ok" {
		return &DamagedError{Path: path, Problem: "quick_check: " + result}
	}
	tables, err := names(ctx, db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
	if err != nil {
		return &DamagedError{Path: path, Problem: err.Error()}
	}
	if !slices.Contains(tables, "prefixes") {
		found := "a SQLite database without tables"
		if len(tables) > 0 {
			found = fmt.Sprintf("a SQLite database with the tables %s but no table prefixes", strings.Join(tables, ", "))
		}
		return &ForeignError{Path: path, Found: found}
	}
	have, err := names(ctx, db, "SELECT name FROM pragma_table_info('prefixes')")
	if err != nil {
		return &DamagedError{Path: path, Problem: err.Error()}
	}
	var missing []string
	for _, c := range columns {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return &ForeignError{Path: path, Found: fmt.Sprintf("a table prefixes with the columns %s, without %s",
			strings.Join(have, ", "), strings.Join(missing, ", "))}
	}
	return nil
}

// names runs a query of one text column and returns its values.
func names(ctx context.Context, db *sql.DB, query string) ([]string, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
