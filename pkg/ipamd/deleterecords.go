package ipamd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/kube"
)

// deleteIdentity is the holder that ipam delete-records writes into the
// Lease.
const deleteIdentity = "ipam-delete-records"

// DeleteRecords is the "ipam delete-records" command: it removes every
// record of IPAM_TRENCH_NAME from the Kubernetes store (its IPAMBlocks,
// then its IPAMPools) and then the replicas' Lease, for a trench that is
// gone (the chart's uninstall hook with ipam.deleteOnUninstall, or a trench
// renamed). It waits up to -wait for the Lease to be free and holds it
// while it removes, so that no replica serves meanwhile. Without -force it
// refuses while any lease in the records has not ended (renewed less than
// IPAM_GARBAGE_COLLECTION_THRESHOLD ago): a proxy may still hold that
// address. -dry-run only prints what it would remove. Exit status: 0
// removed (or would), 1 not (the reason on standard error), 2 usage.
func DeleteRecords(args []string, stdout, stderr io.Writer) int {
	var dryRun, force bool
	wait := 30 * time.Second
	c := command("ipam delete-records", "ipam delete-records [-namespace NS] [-wait DURATION] [-force] [-dry-run]", args, stderr, func(fs *flag.FlagSet, c *Config) {
		namespaceFlag(fs, c)
		leaseWaitFlag(fs, &wait)
		fs.BoolVar(&force, "force", false, "remove even records whose leases have not ended")
		fs.BoolVar(&dryRun, "dry-run", false, "only print what would be removed")
	})
	if c == nil {
		return 2
	}
	if err := deleteRecords(context.Background(), c, wait, force, dryRun, stdout); err != nil {
		fmt.Fprintf(stderr, "ipam delete-records: %v\n", err)
		return 1
	}
	return 0
}

// deleteRecords does the work of DeleteRecords.
func deleteRecords(ctx context.Context, c *Config, wait time.Duration, force, dryRun bool, out io.Writer) (err error) {
	kc, err := openKubeCommand(ctx, c, deleteIdentity, wait)
	if err != nil {
		return err
	}
	removed := false
	defer func() {
		if removed {
			return
		}
		if rerr := kc.held.Release(context.WithoutCancel(ctx)); err == nil {
			err = rerr
		}
	}()
	if err := checkLeases(ctx, c, kc, force, dryRun, out); err != nil {
		return err
	}
	if dryRun {
		return nil
	}
	r, err := kube.DeleteTrench(ctx, kc.opts)
	if err != nil {
		return fmt.Errorf("%w (removed so far: %d IPAMBlocks, %d IPAMPools; run it again to finish)", err, r.Blocks, r.Pools)
	}
	removed = true
	if err := kc.held.Delete(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "removed the records of trench %q in namespace %s: %d IPAMBlocks, %d IPAMPools, and the Lease %s\n",
		c.TrenchName, kc.ns, r.Blocks, r.Pools, c.leaseName())
	return nil
}

// checkLeases prints what the trench's records hold and, unless force,
// refuses while a lease in them has not ended. With force, records that
// cannot be read are no reason to stop.
func checkLeases(ctx context.Context, c *Config, kc *kubeCommand, force, dryRun bool, out io.Writer) error {
	st, err := kube.Open(ctx, kc.opts)
	if err != nil && force {
		fmt.Fprintf(out, "the records cannot all be read (%v); removing them all\n", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("the Kubernetes store (-force removes unreadable records too): %w", err)
	}
	defer st.Close()
	records, err := st.Load(ctx)
	if err != nil {
		return err
	}
	verb := "removing"
	if dryRun {
		verb = "would remove"
	}
	fmt.Fprintf(out, "%s the records of trench %q in namespace %s:\n", verb, c.TrenchName, kc.ns)
	describe(out, records)
	leased, until := leasedRecords(records, c.GarbageCollectionThreshold, time.Now())
	if leased == 0 || force {
		return nil
	}
	return fmt.Errorf("%d leases have not ended (the last ends %s): a proxy may still hold those addresses; "+
		"wait, or use -force if the trench's proxies are gone; nothing removed", leased, until.UTC().Format(time.RFC3339))
}

// leasedRecords counts the node and child records renewed less than
// threshold before now, and says when the last of their leases ends.
func leasedRecords(records []store.Record, threshold time.Duration, now time.Time) (int, time.Time) {
	n := 0
	var until time.Time
	for _, r := range records {
		if r.Key.Level < store.LevelNode {
			continue
		}
		if end := r.Updated.Add(threshold); end.After(now) {
			n++
			if end.After(until) {
				until = end
			}
		}
	}
	return n, until
}
