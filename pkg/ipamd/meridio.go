package ipamd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/meridio"
	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/bolt"
)

// ExitStoreForeign is the exit status of ipam when its datasource is a
// SQLite database that is not Meridio's IPAM (another application's file):
// neither a restart nor a restore helps; point IPAM_DATASOURCE at the right
// file.
const ExitStoreForeign = 4

// MigrationDoc explains the move from Meridio.
const MigrationDoc = "docs/moving-from-meridio.md"

// asideMeridio names the kept original: <datasource>.meridio-<time>.
const asideMeridio = "meridio"

// importOnStart imports the datasource in place if it is a Meridio
// database (see importMeridio); any other file is left to the store's own
// checks.
func importOnStart(ctx context.Context, c *Config, log *slog.Logger) error {
	isSQLite, err := meridio.IsSQLite(c.Datasource)
	if err != nil {
		msg := fmt.Sprintf("IPAM_DATASOURCE must name the store file: %v", err)
		return &daemon.ExitError{Status: 2, Message: msg, Err: fmt.Errorf("IPAM_DATASOURCE must name the store file: %w", err)}
	}
	if !isSQLite {
		return nil
	}
	log.Info("the datasource is a Meridio IPAM database: importing it", "datasource", c.Datasource)
	start := time.Now()
	sum, conv, err := importMeridio(ctx, c, c.Datasource, start)
	if err != nil {
		return foreignExit(c, err)
	}
	// The import's buffers are garbage now: hand them back before the
	// engine loads the new store, so that the two peaks do not add up.
	debug.FreeOSMemory()
	conduits, nodes, children := sum.Totals()
	log.Info("imported the Meridio IPAM database", "datasource", c.Datasource, "keptAs", conv.Aside,
		"trenches", len(sum.Trenches), "conduits", conduits, "nodes", nodes, "children", children,
		"skippedRows", sum.Skipped, "leasesRenewed", sum.Renewed, "heartbeat", sum.Heartbeat,
		"duration", time.Since(start).String())
	for _, s := range sum.SkippedRows {
		log.Warn("Meridio row not imported", "id", s.ID, "name", s.Name, "cidr", s.CIDR, "reason", s.Reason)
	}
	for _, w := range differences(c, sum) {
		log.Warn(w)
	}
	return nil
}

// importMeridio reads the Meridio database at from into a new store at the
// datasource (bolt.Convert); the file that was at the datasource is kept
// as <datasource>.meridio-<time> when it is from itself, as
// .replaced-<time> otherwise.
func importMeridio(ctx context.Context, c *Config, from string, now time.Time) (*meridio.Summary, bolt.Converted, error) {
	opts := readOptions(c, now)
	// Check before anything is written: a foreign or damaged file is
	// refused with nothing created.
	if err := meridio.Check(ctx, from); err != nil {
		return nil, bolt.Converted{}, err
	}
	what := "replaced"
	if sameFile(from, c.Datasource) {
		what = asideMeridio
	}
	var sum *meridio.Summary
	conv, err := bolt.Convert(c.Datasource, what, companions(what), func(put func(store.Record) error) error {
		var err error
		sum, err = meridio.Read(ctx, from, opts, put)
		return err
	}, now)
	if err != nil {
		return nil, conv, fmt.Errorf("import %s: %w", from, err)
	}
	return sum, conv, nil
}

// companions are the files beside the datasource that go with the
// original: SQLite's, when it is the Meridio database itself.
func companions(what string) []string {
	if what == asideMeridio {
		return meridio.Companions
	}
	return nil
}

// sameFile reports whether the paths a and b name the same existing file.
func sameFile(a, b string) bool {
	ia, errA := os.Stat(a)
	ib, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(ia, ib)
}

func readOptions(c *Config, now time.Time) meridio.Options {
	opts := meridio.Options{Now: now}
	if ecfg, err := c.engineConfig(); err == nil {
		opts.IPv4, opts.IPv6 = ecfg.IPv4, ecfg.IPv6
	}
	return opts
}

// differences are the warnings about what the database holds that the
// environment says otherwise: the stored geometry wins, and a trench that
// IPAM_TRENCH_NAME does not name is kept but not served.
func differences(c *Config, sum *meridio.Summary) []string {
	var out []string
	ecfg, _ := c.engineConfig()
	served := false
	for _, t := range sum.Trenches {
		if t.Name != c.TrenchName {
			out = append(out, fmt.Sprintf("the Meridio database holds trench %q (%s), IPAM_TRENCH_NAME is %q: its allocations are kept in the store but not served",
				t.Name, t.Family, c.TrenchName))
			continue
		}
		served = true
		var fc *ipam.FamilyConfig
		if t.Family == ipam.IPv4 {
			fc = ecfg.IPv4
		} else {
			fc = ecfg.IPv6
		}
		g := t.Geometry
		if fc != nil && (fc.Pool != g.Pool || fc.ConduitLength != g.ConduitLength || fc.NodeLength != g.NodeLength) {
			fam := "IPV4"
			if t.Family == ipam.IPv6 {
				fam = "IPV6"
			}
			out = append(out, fmt.Sprintf("stored %s geometry %s conduit /%d node /%d wins over the environment's "+
				"%s conduit /%d node /%d (IPAM_PREFIX_%s, IPAM_CONDUIT_PREFIX_LENGTH_%s, IPAM_NODE_PREFIX_LENGTH_%s), as in Meridio",
				t.Family, g.Pool, g.ConduitLength, g.NodeLength, fc.Pool, fc.ConduitLength, fc.NodeLength, fam, fam, fam))
		}
	}
	if !served && len(sum.Trenches) > 0 {
		out = append(out, fmt.Sprintf("nothing in the Meridio database is served: no trench named %q (IPAM_TRENCH_NAME)", c.TrenchName))
	}
	return out
}

// foreignExit turns a refused Meridio file into a *daemon.ExitError:
// ExitStoreForeign for another application's SQLite file, ExitStoreDamaged
// for a damaged one; other errors are returned as they are.
func foreignExit(c *Config, err error) error {
	var f *meridio.ForeignError
	var d *meridio.DamagedError
	switch {
	case errors.As(err, &f):
		return &daemon.ExitError{Status: ExitStoreForeign, Err: err, Message: fmt.Sprintf(
			"store %s; the IPAM does not start on it and leaves it untouched: point IPAM_DATASOURCE at the IPAM's own file; see %s",
			f.Error(), MigrationDoc)}
	case errors.As(err, &d):
		return &daemon.ExitError{Status: ExitStoreDamaged, Err: err, Message: fmt.Sprintf(
			"%s; the IPAM does not start on it and leaves it untouched: put back a copy of Meridio's file, "+
				"or move it aside to start empty (the proxies' renewals re-claim what they hold); see %s",
			d.Error(), MigrationDoc)}
	}
	return err
}
