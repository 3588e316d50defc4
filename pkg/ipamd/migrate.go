package ipamd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/bolt"
	"github.com/causeway-net/causeway/pkg/ipam/store/kube"
)

// Migrate is the "ipam migrate" command: it copies the bbolt store at the
// datasource into the Kubernetes store of IPAM_TRENCH_NAME (in
// IPAM_KUBE_NAMESPACE, through IPAM_KUBECONFIG or the pod's account), every
// record as it is, and reads the target back to check it. It refuses a
// target that holds any record of the trench (a replica that ever ran has
// written its pools), and a file that a running IPAM holds. -dry-run prints
// what it would write and writes nothing. Exit status: 0 copied (or would
// copy), 1 nothing copied, 2 usage.
func Migrate(args []string, stdout, stderr io.Writer) int {
	var dryRun bool
	c := command("ipam migrate", "ipam migrate [-datasource FILE] [-namespace NS] [-dry-run]", args, stderr, func(fs *flag.FlagSet, c *Config) {
		namespaceFlag(fs, c)
		fs.BoolVar(&dryRun, "dry-run", false, "only print what would be written")
	})
	if c == nil {
		return 2
	}
	if err := migrate(context.Background(), c, dryRun, stdout); err != nil {
		fmt.Fprintf(stderr, "ipam migrate: %v\n", err)
		return 1
	}
	return 0
}

// migrate does the work of Migrate.
func migrate(ctx context.Context, c *Config, dryRun bool, out io.Writer) error {
	records, err := readBolt(ctx, c.Datasource)
	if err != nil {
		return err
	}
	var ops []store.Op
	others := 0
	for _, r := range records {
		if r.Key.Trench != c.TrenchName {
			others++
			continue
		}
		ops = append(ops, store.Op{Kind: store.OpPut, Record: r})
	}
	if others > 0 {
		return fmt.Errorf("%s holds %d records of trenches other than IPAM_TRENCH_NAME %q: a Kubernetes store holds one trench; nothing written", c.Datasource, others, c.TrenchName)
	}
	rc, err := restConfig(c.Kubeconfig)
	if err != nil {
		return err
	}
	ns, _, err := c.replicaNames()
	if err != nil {
		return err
	}
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	opts := kube.Options{Client: client, Namespace: ns, Trench: c.TrenchName, Logger: slog.New(slog.DiscardHandler)}
	target, err := kube.Open(ctx, opts)
	if err != nil {
		return fmt.Errorf("the Kubernetes store: %w", err)
	}
	defer target.Close()
	held, err := target.Load(ctx)
	if err != nil {
		return err
	}
	if len(held) > 0 {
		return fmt.Errorf("the Kubernetes store of trench %q in namespace %s already holds %d records: it is migrated to only while empty (stop the replicas and delete its ipampools and ipamblocks to start over); nothing written", c.TrenchName, ns, len(held))
	}
	verb := "copied"
	if dryRun {
		verb = "would copy"
	}
	fmt.Fprintf(out, "%s %s into the Kubernetes store of trench %q in namespace %s:\n", verb, c.Datasource, c.TrenchName, ns)
	describe(out, records)
	if dryRun {
		return nil
	}
	start := time.Now()
	if err := target.Apply(ctx, ops); err != nil {
		return fmt.Errorf("writing the records: %w (what was written stays: delete the trench's ipampools and ipamblocks before trying again)", err)
	}
	return verify(ctx, opts, records, out, start)
}

// readBolt loads every record of the bbolt file at path (refused while an
// IPAM holds it).
func readBolt(ctx context.Context, path string) ([]store.Record, error) {
	st, err := bolt.Open(path, time.Second)
	if err != nil {
		return nil, fmt.Errorf("the bbolt store (stop the IPAM first): %w", err)
	}
	defer st.Close()
	return st.Load(ctx)
}

// verify reads the Kubernetes store back and compares it with records.
func verify(ctx context.Context, opts kube.Options, records []store.Record, out io.Writer, start time.Time) error {
	back, err := kube.Open(ctx, opts)
	if err != nil {
		return fmt.Errorf("reading the records back: %w", err)
	}
	defer back.Close()
	got, err := back.Load(ctx)
	if err != nil {
		return fmt.Errorf("reading the records back: %w", err)
	}
	want := map[store.Key]string{}
	for _, r := range records {
		want[r.Key] = r.Prefix.String()
	}
	for _, r := range got {
		if want[r.Key] != r.Prefix.String() {
			return fmt.Errorf("read back %v at %s, the file has %q", r.Key, r.Prefix, want[r.Key])
		}
		delete(want, r.Key)
	}
	if len(want) > 0 {
		return fmt.Errorf("%d records not read back", len(want))
	}
	fmt.Fprintf(out, "written in %s and read back: every record at its prefix\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// describe prints the records down to the nodes, with the children of each
// node counted.
func describe(out io.Writer, records []store.Record) {
	children := map[store.Key]int{}
	for _, r := range records {
		if r.Key.Level == store.LevelChild {
			k := r.Key
			k.Level, k.Child = store.LevelNode, ""
			children[k]++
		}
	}
	var counts [store.LevelChild + 1]int
	for _, r := range records {
		counts[r.Key.Level]++
		k := r.Key
		switch k.Level {
		case store.LevelTrench:
			fmt.Fprintf(out, "  trench %s ipv%d: pool %s\n", k.Trench, k.Family, r.Prefix)
		case store.LevelConduit:
			fmt.Fprintf(out, "    conduit %s: %s\n", k.Conduit, r.Prefix)
		case store.LevelNode:
			fmt.Fprintf(out, "      node %s: %s, %d addresses\n", k.Node, r.Prefix, children[k])
		}
	}
	fmt.Fprintf(out, "total: %d pools, %d conduit subnets, %d node subnets (one IPAMBlock each), %d addresses\n",
		counts[store.LevelTrench], counts[store.LevelConduit], counts[store.LevelNode], counts[store.LevelChild])
}
