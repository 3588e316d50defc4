package labrun

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
)

// Row is one check: its name, whether it passed and what was seen.
type Row struct {
	Name   string
	OK     bool
	Detail string
}

// Report is the outcome of Check, one row per check.
type Report struct {
	Rows []Row
}

// OK reports whether every check passed (and there was at least one).
func (r Report) OK() bool {
	if len(r.Rows) == 0 {
		return false
	}
	for _, row := range r.Rows {
		if !row.OK {
			return false
		}
	}
	return true
}

// Failed are the rows that did not pass.
func (r Report) Failed() []Row {
	var out []Row
	for _, row := range r.Rows {
		if !row.OK {
			out = append(out, row)
		}
	}
	return out
}

// Print writes the report as a table.
func (r Report) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESULT\tCHECK\tDETAIL")
	for _, row := range r.Rows {
		res := "ok"
		if !row.OK {
			res = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", res, row.Name, row.Detail)
	}
	_ = tw.Flush()
	passed := len(r.Rows) - len(r.Failed())
	fmt.Fprintf(w, "%d/%d checks passed\n", passed, len(r.Rows))
}

func (r *Report) add(name string, ok bool, format string, args ...any) {
	r.Rows = append(r.Rows, Row{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
