package ipamd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/causeway-net/causeway/pkg/ipam/store/bolt"
)

// Restore is the "ipam restore" command: it puts a snapshot back in place
// of the datasource (see bolt.Restore) and says what the snapshot may lack.
// Without -from it takes the newest snapshot that checks. The IPAM must be
// stopped. Exit status: 0 restored, 1 nothing restored, 2 usage.
func Restore(args []string, stdout, stderr io.Writer) int {
	var from string
	c := command("ipam restore", "ipam restore [-from SNAPSHOT] [-datasource FILE] [-snapshot-dir DIR]", args, stderr, func(fs *flag.FlagSet, c *Config) {
		fs.StringVar(&c.SnapshotDir, "snapshot-dir", c.SnapshotDir, "where the snapshots are (default IPAM_SNAPSHOT_DIR, or snapshots/ next to the datasource)")
		fs.StringVar(&from, "from", "", "the snapshot file to restore (default: the newest one that checks)")
	})
	if c == nil {
		return 2
	}
	sn := c.snapshots()
	var candidates []bolt.SnapshotFile
	if from != "" {
		candidates = []bolt.SnapshotFile{bolt.SnapshotAt(from)}
	} else {
		list, err := sn.List()
		if err != nil {
			fmt.Fprintf(stderr, "ipam restore: %v\n", err)
			return 1
		}
		if len(list) == 0 {
			fmt.Fprintf(stderr, "ipam restore: no snapshot of %s in %s\n", sn.Base, sn.Dir)
			return 1
		}
		candidates = list
	}
	for _, snap := range candidates {
		r, err := bolt.Restore(c.Datasource, snap.Path, time.Now())
		var d *bolt.DamagedError
		if errors.As(err, &d) && d.Path == snap.Path && from == "" {
			fmt.Fprintf(stderr, "ipam restore: skipping %v\n", err)
			continue
		}
		if err != nil {
			fmt.Fprintf(stderr, "ipam restore: %v\n", err)
			return 1
		}
		report(stdout, c.Datasource, snap, r)
		return 0
	}
	fmt.Fprintf(stderr, "ipam restore: no snapshot in %s checks; nothing restored\n", sn.Dir)
	return 1
}

// report says what was done and what the snapshot may lack.
func report(w io.Writer, datasource string, snap bolt.SnapshotFile, r bolt.Restored) {
	taken := "when it was taken"
	if !snap.Time.IsZero() {
		taken = snap.Time.Format(time.RFC3339)
	}
	fmt.Fprintf(w, "restored %s from %s (taken %s: %d conduit, %d node and %d child allocations)\n",
		datasource, snap.Path, taken, r.Contents.Conduits, r.Contents.Nodes, r.Contents.Children)
	switch {
	case r.Aside != "" && r.AsideDamaged:
		fmt.Fprintf(w, "the damaged file is kept at %s\n", r.Aside)
	case r.Aside != "":
		fmt.Fprintf(w, "the file that was there (it was not damaged) is kept at %s\n", r.Aside)
	}
	fmt.Fprintf(w, "the snapshot lacks what changed after %s: allocations made since, releases since "+
		"(those addresses stay taken until their leases end) and lease renewals (leases are extended by the time since).\n", taken)
	fmt.Fprintln(w, "start the IPAM again: the proxies' renewals (Allocate is idempotent) re-claim every address they hold "+
		"that the snapshot has; a child allocated after the snapshot is allocated again, possibly at another address, "+
		"which its proxy follows.")
}
