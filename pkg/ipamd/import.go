package ipamd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/pkg/ipam/meridio"
	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// Import is the "ipam import" command: it reads a Meridio IPAM database
// and, unless -dry-run, makes it the store at the datasource (the file
// there, if any, is kept aside; see importMeridio). It prints what it
// imports (or would). The IPAM must be stopped. Exit status: 0 imported,
// 1 nothing imported, 2 usage, ExitStoreForeign and ExitStoreDamaged as the
// service for a file it refuses.
func Import(args []string, stdout, stderr io.Writer) int {
	var from string
	var dryRun bool
	c := command("ipam import", "ipam import -from FILE [-dry-run] [-datasource FILE]", args, stderr, func(fs *flag.FlagSet, _ *Config) {
		fs.StringVar(&from, "from", "", "the Meridio database to import (required)")
		fs.BoolVar(&dryRun, "dry-run", false, "only print what would be imported")
	})
	if c == nil {
		return 2
	}
	if from == "" {
		fmt.Fprintln(stderr, "ipam import: -from FILE is required")
		return 2
	}
	ctx := context.Background()
	now := time.Now()
	if _, err := os.Stat(from); err != nil {
		fmt.Fprintf(stderr, "ipam import: %v\n", err)
		return 1
	}
	if isSQLite, err := meridio.IsSQLite(from); err != nil || !isSQLite {
		if err == nil {
			err = fmt.Errorf("%s does not begin with the SQLite header: it is not a Meridio IPAM database; %s", from, meridio.Expected)
		}
		fmt.Fprintf(stderr, "ipam import: %v\n", err)
		return ExitStoreForeign
	}
	if dryRun {
		sum, err := meridio.Read(ctx, from, readOptions(c, now), func(store.Record) error { return nil })
		if err != nil {
			return importFailed(c, err, stderr)
		}
		fmt.Fprintf(stdout, "dry run: would import %s into %s\n", from, c.Datasource)
		writeSummary(stdout, c, sum)
		return 0
	}
	sum, conv, err := importMeridio(ctx, c, from, now)
	if err != nil {
		return importFailed(c, err, stderr)
	}
	fmt.Fprintf(stdout, "imported %s into %s\n", from, c.Datasource)
	writeSummary(stdout, c, sum)
	if conv.Aside != "" {
		fmt.Fprintf(stdout, "the file that was at %s is kept at %s\n", c.Datasource, conv.Aside)
	}
	return 0
}

func importFailed(c *Config, err error, stderr io.Writer) int {
	fmt.Fprintf(stderr, "ipam import: %v\n", err)
	var ee *daemon.ExitError
	if errors.As(foreignExit(c, err), &ee) {
		return ee.Status
	}
	return 1
}

// writeSummary prints the counts per trench, the warnings and the skipped
// rows.
func writeSummary(w io.Writer, c *Config, sum *meridio.Summary) {
	for _, t := range sum.Trenches {
		g := t.Geometry
		fmt.Fprintf(w, "  trench %s %s: pool %s, conduit /%d (%s), node /%d (%s): %d conduits, %d nodes, %d children\n",
			t.Name, t.Family, g.Pool, g.ConduitLength, origin(t.StoredConduitLength), g.NodeLength, origin(t.StoredNodeLength),
			t.Conduits, t.Nodes, t.Children)
	}
	conduits, nodes, children := sum.Totals()
	fmt.Fprintf(w, "total: %d trench roots, %d conduits, %d nodes, %d children; newest lease %s; %d leases renewed (none stored or not expirable)\n",
		len(sum.Trenches), conduits, nodes, children, sum.Heartbeat.Format(time.RFC3339), sum.Renewed)
	for _, d := range differences(c, sum) {
		fmt.Fprintf(w, "warning: %s\n", d)
	}
	if sum.Skipped > 0 {
		fmt.Fprintf(w, "%d rows not imported", sum.Skipped)
		if sum.Skipped > len(sum.SkippedRows) {
			fmt.Fprintf(w, " (the first %d listed)", len(sum.SkippedRows))
		}
		fmt.Fprintln(w, ":")
		for _, s := range sum.SkippedRows {
			fmt.Fprintf(w, "  id %q name %q cidr %q: %s\n", s.ID, s.Name, s.CIDR, s.Reason)
		}
	}
}

func origin(stored bool) string {
	if stored {
		return "stored"
	}
	return "configured: no stored row shows it"
}
