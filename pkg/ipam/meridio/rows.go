package meridio

import (
	"database/sql"
	"strconv"
	"strings"
	"time"
)

// row is one row of the prefixes table.
type row struct {
	id, name, cidr, parent string
	updated                time.Time // zero if NULL or unreadable
	expirable              bool
}

// selectRows reads the columns of a row in the order scanRow expects. The
// lease time is read as text: SQLite keeps what the writer gave it.
const selectRows = "SELECT COALESCE(id, ''), COALESCE(name, ''), COALESCE(cidr, ''), COALESCE(parent_id, ''), " +
	"CAST(updated_at AS TEXT), expirable FROM prefixes"

// rootsOnly, conduitsOnly and nodesOnly select the rows of the first three
// levels of the tree; every other row is a child or skipped.
const (
	rootCond     = "(parent_id IS NULL OR parent_id = '')"
	rootsOnly    = selectRows + " WHERE " + rootCond
	conduitsOnly = selectRows + " WHERE parent_id IN (SELECT id FROM prefixes WHERE " + rootCond + ")"
	nodesOnly    = selectRows + " WHERE parent_id IN (SELECT id FROM prefixes WHERE parent_id IN (SELECT id FROM prefixes WHERE " + rootCond + "))"
)

func scanRow(rows *sql.Rows) (row, error) {
	var r row
	var updated sql.NullString
	var expirable any
	if err := rows.Scan(&r.id, &r.name, &r.cidr, &r.parent, &updated, &expirable); err != nil {
		return row{}, err
	}
	if updated.Valid {
		r.updated = parseTime(updated.String)
	}
	r.expirable = truthy(expirable)
	return r, nil
}

// timeLayouts are the text forms a time may have in the table: what
// Meridio's driver writes first.
var timeLayouts = []string{
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999 -0700 MST",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02",
}

// parseTime reads a stored time (zero if it cannot be read); a number is
// Unix seconds.
func parseTime(s string) time.Time {
	s = strings.TrimSpace(s)
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC()
		}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
		return time.Unix(n, 0).UTC()
	}
	return time.Time{}
}

// truthy reads a stored boolean (gorm writes 0 and 1).
func truthy(v any) bool {
	switch v := v.(type) {
	case int64:
		return v != 0
	case float64:
		return v != 0
	case bool:
		return v
	case string:
		return isTrueText(v)
	case []byte:
		return isTrueText(string(v))
	}
	return false
}

func isTrueText(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "t", "true":
		return true
	}
	return false
}
