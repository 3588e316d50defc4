//go:build apiserver

package ipamd

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/kube"
)

// kubeCmd runs one of the commands on the Kubernetes store with the
// test's datasource and namespace; it returns the exit status, standard
// output and standard error.
func kubeCmd(cmd func([]string, *bytes.Buffer, *bytes.Buffer) int, args ...string) (int, string, string) {
	var out, errs bytes.Buffer
	code := cmd(append([]string{"-namespace", "default"}, args...), &out, &errs)
	return code, out.String(), errs.String()
}

func migrateCmd(args []string, out, errs *bytes.Buffer) int { return Migrate(args, out, errs) }
func exportCmd(args []string, out, errs *bytes.Buffer) int  { return Export(args, out, errs) }
func deleteCmd(args []string, out, errs *bytes.Buffer) int  { return DeleteRecords(args, out, errs) }

// boltWithChildren runs a bbolt IPAM that allocates children t0..t4 of
// conduit a (and an IPv6 bridge in conduit b), stops it, and returns its
// file and the IPv4 addresses.
func boltWithChildren(t *testing.T) (string, map[string]string) {
	t.Helper()
	cfg := testConfig(t)
	client, _, stop := start(t, cfg)
	held := map[string]string{}
	for i := range 5 {
		child := fmt.Sprintf("t%d", i)
		held[child] = allocateChild(t, client, child)
	}
	allocate(t, client, ipamv1.IPFamily_IPV6, "b")
	require.NoError(t, stop())
	return cfg.Datasource, held
}

// kubeReplica starts one ipam process on the Kubernetes store of api.
func kubeReplica(t *testing.T, kc string) runningReplica {
	t.Helper()
	cfg := testConfig(t)
	cfg.Store, cfg.Kubeconfig, cfg.KubeNamespace = StoreKubernetes, kc, "default"
	cfg.Identity, cfg.LeaderLeaseDuration = "ipam-0", 3*time.Second
	client, conn, stop := start(t, cfg)
	r := runningReplica{client, conn, stop}
	waitServing(t, []runningReplica{r})
	return r
}

// bolt -> Kubernetes -> bolt: ipam export writes what the Kubernetes store
// holds into a new file, record for record; it refuses a file that holds
// records and waits for (then gives up on) a Lease that a serving replica
// renews; after the replica stops, the exported file serves every child
// at its address, those allocated on the Kubernetes store included.
func TestExportRoundTrip(t *testing.T) {
	api := startAPI(t)
	kc := kubeconfig(t, api, api.Config.Host)
	t.Setenv("IPAM_KUBECONFIG", kc)
	first, held := boltWithChildren(t)
	want, err := readBolt(context.Background(), first)
	require.NoError(t, err)
	code, _, errs := kubeCmd(migrateCmd, "-datasource", first)
	require.Equal(t, 0, code, errs)

	back := filepath.Join(t.TempDir(), "back", "registry.db")
	code, out, errs := kubeCmd(exportCmd, "-datasource", back, "-dry-run")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "would copy")
	assert.Contains(t, out, "total: 2 pools, 2 conduit subnets, 2 node subnets (one IPAMBlock each), 6 addresses")
	assert.NoFileExists(t, back, "a dry run writes nothing")

	code, out, errs = kubeCmd(exportCmd, "-datasource", back)
	require.Equal(t, 0, code, errs)
	t.Log(out)
	assert.Contains(t, out, "read back: 12 records, each as in the Kubernetes store")
	got, err := readBolt(context.Background(), back)
	require.NoError(t, err)
	require.NoError(t, sameRecords(want, got), "the round trip keeps every record, leases and heartbeat included")

	code, _, errs = kubeCmd(exportCmd, "-datasource", back)
	require.Equal(t, 1, code)
	assert.Contains(t, errs, "already holds 12 records")

	// A replica serves on the Kubernetes store and allocates one more.
	r := kubeReplica(t, kc)
	held["t9"] = allocateChild(t, r.client, "t9")
	again := filepath.Join(t.TempDir(), "registry.db")
	code, _, errs = kubeCmd(exportCmd, "-datasource", again, "-wait", "2s")
	require.Equal(t, 1, code, "the serving replica renews its Lease")
	assert.Contains(t, errs, `held by "ipam-0"`)
	assert.NoFileExists(t, again)
	require.NoError(t, r.stop())

	code, _, errs = kubeCmd(exportCmd, "-datasource", again)
	require.Equal(t, 0, code, errs)
	cfg := testConfig(t)
	cfg.Datasource = again
	client, _, stop := start(t, cfg)
	for child, addr := range held {
		assert.Equal(t, addr, allocateChild(t, client, child), "%s keeps its address", child)
	}
	fresh := allocateChild(t, client, "new")
	for child, addr := range held {
		assert.NotEqual(t, addr, fresh, "a new child does not get %s's address", child)
	}
	require.NoError(t, stop())
}

// ipam delete-records removes a trench's IPAMBlocks, IPAMPools and Lease,
// and nothing of another trench; it refuses while a lease has not ended
// (unless -force) and while a replica serves (it holds the Lease).
func TestDeleteRecordsRemovesTheTrench(t *testing.T) {
	api := startAPI(t)
	kc := kubeconfig(t, api, api.Config.Host)
	t.Setenv("IPAM_KUBECONFIG", kc)
	first, _ := boltWithChildren(t)
	code, _, errs := kubeCmd(migrateCmd, "-datasource", first)
	require.Equal(t, 0, code, errs)
	records, err := dynamic.NewForConfig(api.Config)
	require.NoError(t, err)
	other, err := kube.Open(context.Background(), kube.Options{Client: records, Namespace: "default", Trench: "other", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, other.Apply(context.Background(), otherTrench()))

	code, out, errs := kubeCmd(deleteCmd, "-dry-run", "-force")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "would remove the records of trench \"default\"")
	for _, dry := range []string{"-dry-run", "-wait=30s"} {
		code, _, errs = kubeCmd(deleteCmd, dry)
		require.Equal(t, 1, code, dry)
		assert.Contains(t, errs, "8 leases have not ended", dry)
	}
	assert.Equal(t, []string{"default", "default", "other"}, trenchesOf(t, records, kube.PoolResource), "nothing removed")

	r := kubeReplica(t, kc)
	code, _, errs = kubeCmd(deleteCmd, "-force", "-wait", "2s")
	require.Equal(t, 1, code, "the serving replica renews its Lease")
	assert.Contains(t, errs, `held by "ipam-0"`)
	require.NoError(t, r.stop())

	// The leases end: without -force it removes.
	time.Sleep(1100 * time.Millisecond)
	t.Setenv("IPAM_GARBAGE_COLLECTION_THRESHOLD", "1s")
	code, out, errs = kubeCmd(deleteCmd)
	require.Equal(t, 0, code, errs)
	t.Log(out)
	assert.Contains(t, out, "2 IPAMBlocks, 2 IPAMPools, and the Lease causeway-ipam-default")
	assert.Equal(t, []string{"other"}, trenchesOf(t, records, kube.PoolResource))
	assert.Empty(t, trenchesOf(t, records, kube.BlockResource))
	cs, err := kubernetes.NewForConfig(api.Config)
	require.NoError(t, err)
	_, err = cs.CoordinationV1().Leases("default").Get(context.Background(), "causeway-ipam-default", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the Lease is gone: %v", err)

	code, out, errs = kubeCmd(deleteCmd)
	require.Equal(t, 0, code, "again: nothing left to remove; %s", errs)
	assert.Contains(t, out, "0 IPAMBlocks, 0 IPAMPools")
}

// otherTrench is a pool of the trench "other".
func otherTrench() []store.Op {
	return []store.Op{{Kind: store.OpPut, Record: store.Record{
		Key: store.Key{Level: store.LevelTrench, Trench: "other", Family: 4}, Prefix: netip.MustParsePrefix("10.0.0.0/16"),
		ConduitLength: 20, NodeLength: 24, Updated: time.Now(),
	}}}
}

// trenchesOf lists spec.trench of every object of gvr in default, sorted.
func trenchesOf(t *testing.T, client dynamic.Interface, gvr schema.GroupVersionResource) []string {
	t.Helper()
	l, err := client.Resource(gvr).Namespace("default").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, u := range l.Items {
		trench, _, _ := unstructured.NestedString(u.Object, "spec", "trench")
		out = append(out, trench)
	}
	slices.Sort(out)
	return out
}
