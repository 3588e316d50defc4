package ipamd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/bolt"
	"github.com/causeway-net/causeway/pkg/ipam/store/kube"
)

// exportIdentity is the holder that ipam export writes into the Lease.
const exportIdentity = "ipam-export"

// Export is the "ipam export" command, the way back from replicas to one:
// it copies the Kubernetes store of IPAM_TRENCH_NAME (in
// IPAM_KUBE_NAMESPACE, through IPAM_KUBECONFIG or the pod's account) into a
// new bbolt file at the datasource, every record as it is, and reads the
// file back to check it. It refuses a datasource that holds any record (or
// that a running IPAM holds), and waits up to -wait for the replicas' Lease
// to be free: it holds the Lease while it reads, so that no replica serves
// meanwhile, and releases it at the end. -dry-run prints what it would
// write and writes nothing. Exit status: 0 copied (or would copy), 1
// nothing copied, 2 usage.
func Export(args []string, stdout, stderr io.Writer) int {
	var dryRun bool
	wait := 30 * time.Second
	c := command("ipam export", "ipam export [-datasource FILE] [-namespace NS] [-wait DURATION] [-dry-run]", args, stderr, func(fs *flag.FlagSet, c *Config) {
		namespaceFlag(fs, c)
		leaseWaitFlag(fs, &wait)
		fs.BoolVar(&dryRun, "dry-run", false, "only print what would be written")
	})
	if c == nil {
		return 2
	}
	if err := export(context.Background(), c, wait, dryRun, stdout); err != nil {
		fmt.Fprintf(stderr, "ipam export: %v\n", err)
		return 1
	}
	return 0
}

// export does the work of Export.
func export(ctx context.Context, c *Config, wait time.Duration, dryRun bool, out io.Writer) (err error) {
	if err := refuseNonEmpty(ctx, c.Datasource); err != nil {
		return err
	}
	kc, err := openKubeCommand(ctx, c, exportIdentity, wait)
	if err != nil {
		return err
	}
	defer func() {
		if rerr := kc.held.Release(context.WithoutCancel(ctx)); err == nil {
			err = rerr
		}
	}()
	src, err := kube.Open(ctx, kc.opts)
	if err != nil {
		return fmt.Errorf("the Kubernetes store: %w", err)
	}
	defer src.Close()
	records, err := src.Load(ctx)
	if err != nil {
		return err
	}
	if len(records) == 0 {
		return fmt.Errorf("the Kubernetes store of trench %q in namespace %s holds no record; nothing written", c.TrenchName, kc.ns)
	}
	verb := "copied"
	if dryRun {
		verb = "would copy"
	}
	fmt.Fprintf(out, "%s the Kubernetes store of trench %q in namespace %s into %s:\n", verb, c.TrenchName, kc.ns, c.Datasource)
	describe(out, records)
	if dryRun {
		return nil
	}
	start := time.Now()
	if err := os.MkdirAll(filepath.Dir(c.Datasource), 0o750); err != nil {
		return err
	}
	fill := func(put func(store.Record) error) error { return store.Walk(records, put) }
	if _, err := bolt.Convert(c.Datasource, "replaced", nil, fill, start); err != nil {
		return fmt.Errorf("writing %s: %w", c.Datasource, err)
	}
	back, err := readBolt(ctx, c.Datasource)
	if err != nil {
		return fmt.Errorf("reading %s back: %w", c.Datasource, err)
	}
	if err := sameRecords(records, back); err != nil {
		return fmt.Errorf("%s read back: %w", c.Datasource, err)
	}
	fmt.Fprintf(out, "written in %s and read back: %d records, each as in the Kubernetes store\n", time.Since(start).Round(time.Millisecond), len(back))
	return nil
}

// refuseNonEmpty fails if the file at path holds any record, cannot be
// read as a store, or is held by a running IPAM. A missing file is fine.
func refuseNonEmpty(ctx context.Context, path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	held, err := readBolt(ctx, path)
	if err != nil {
		return err
	}
	if len(held) > 0 {
		return fmt.Errorf("%s already holds %d records: export writes only a new or empty store (move the file away first); nothing written", path, len(held))
	}
	return nil
}

// sameRecords reports the first difference between two lists of records in
// key order: a record missing, added, or with another value.
func sameRecords(want, got []store.Record) error {
	for i := range min(len(want), len(got)) {
		w, g := want[i], got[i]
		if w.Key != g.Key {
			return fmt.Errorf("record %d is %v, expected %v", i, g.Key, w.Key)
		}
		if w.Prefix != g.Prefix || !w.Updated.Equal(g.Updated) || w.ConduitLength != g.ConduitLength || w.NodeLength != g.NodeLength {
			return fmt.Errorf("%v is %s (updated %s), expected %s (updated %s)", w.Key, g.Prefix, g.Updated, w.Prefix, w.Updated)
		}
	}
	if len(want) != len(got) {
		return fmt.Errorf("%d records, expected %d", len(got), len(want))
	}
	return nil
}
