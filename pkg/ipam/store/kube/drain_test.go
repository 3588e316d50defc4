package kube

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/causeway-net/causeway/internal/clock"
	"github.com/causeway-net/causeway/pkg/ipam"
)

// A conduit that leaves the configuration: its records stay while one of
// its children is leased, and go, IPAMBlocks and index entries, once every
// lease in it has ended; the conduit still configured keeps its own.
func TestDrainedConduitRecordsGo(t *testing.T) {
	drainedConduitRecordsGo(t, newFakeAPI(), ns)
}

// drainedConduitRecordsGo runs the scenario of TestDrainedConduitRecordsGo
// on client (the fake API, or a real API server).
func drainedConduitRecordsGo(t *testing.T, client dynamic.Interface, namespace string) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	opts := Options{Client: client, Namespace: namespace, Trench: "blue", Identity: "r1", Logger: slog.New(slog.DiscardHandler)}
	st, err := Open(ctx, opts)
	require.NoError(t, err)
	e, err := ipam.New(ctx, st, ipam.Config{
		Trench: "blue", IPv4: &ipam.FamilyConfig{Pool: netip.MustParsePrefix("172.16.0.0/16"), ConduitLength: 20, NodeLength: 24},
		GCThreshold: 40 * time.Minute, Clock: clk, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	defer e.Close()
	alloc := func(conduit, node, child string) {
		t.Helper()
		_, err := e.Allocate(ctx, ipam.Subnet{Trench: "blue", Conduit: conduit, Node: node, Family: ipam.IPv4}, child)
		require.NoError(t, err, "%s/%s/%s", conduit, node, child)
	}
	renewKept := func() {
		for _, n := range []string{"w1", "w2"} {
			alloc("kept", n, "bridge")
		}
	}
	for _, c := range []string{"kept", "gone"} {
		for _, n := range []string{"w1", "w2"} {
			alloc(c, n, "bridge")
			alloc(c, n, "t-1-src")
		}
	}
	commit := func() {
		t.Helper()
		e.FlushLeases()
		e.CollectGarbage()
		require.NoError(t, e.Sync(ctx))
	}
	e.SyncConduits([]string{"kept", "gone"})
	e.SyncConduits([]string{"kept"})
	commit()
	assert.Equal(t, []string{"gone/w1", "gone/w2", "kept/w1", "kept/w2"}, blocksOn(t, client, namespace), "draining: everything leased stays")

	// 45 minutes on: one child of gone/w1 was renewed 15 minutes ago.
	clk.Advance(30 * time.Minute)
	renewKept()
	alloc("gone", "w1", "t-1-src")
	clk.Advance(15 * time.Minute)
	renewKept()
	commit()
	assert.Equal(t, []string{"gone/w1", "kept/w1", "kept/w2"}, blocksOn(t, client, namespace),
		"gone/w2 went with its last lease; gone/w1 stays while its child is leased")
	assert.Equal(t, []string{"gone", "kept"}, conduitsOn(t, client, namespace))

	// Its last lease ends: the node, then the conduit, go.
	clk.Advance(30 * time.Minute)
	renewKept()
	commit()
	assert.Equal(t, []string{"kept/w1", "kept/w2"}, blocksOn(t, client, namespace))
	assert.Equal(t, []string{"kept"}, conduitsOn(t, client, namespace), "the conduit leaves the pool's index")

	// The next replica loads no trace of it.
	next, err := Open(ctx, Options{Client: client, Namespace: namespace, Trench: "blue", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	recs, err := next.Load(ctx)
	require.NoError(t, err)
	for _, r := range recs {
		assert.NotEqual(t, "gone", r.Key.Conduit, "%v", r.Key)
	}
}

// blocksOn lists conduit/node of every IPAMBlock in namespace.
func blocksOn(t *testing.T, client dynamic.Interface, namespace string) []string {
	t.Helper()
	var out []string
	for _, u := range listOn(t, client, namespace, BlockResource.Resource) {
		c, _, _ := unstructured.NestedString(u.Object, "spec", "conduit")
		n, _, _ := unstructured.NestedString(u.Object, "spec", "node")
		out = append(out, c+"/"+n)
	}
	slices.Sort(out)
	return out
}

// conduitsOn lists the conduits in the index of every IPAMPool in
// namespace.
func conduitsOn(t *testing.T, client dynamic.Interface, namespace string) []string {
	t.Helper()
	var out []string
	for _, u := range listOn(t, client, namespace, PoolResource.Resource) {
		entries, _, _ := unstructured.NestedSlice(u.Object, "spec", "conduits")
		for _, c := range entries {
			out = append(out, c.(map[string]any)["name"].(string))
		}
	}
	slices.Sort(out)
	return out
}

func listOn(t *testing.T, client dynamic.Interface, namespace, resource string) []unstructured.Unstructured {
	t.Helper()
	gvr := BlockResource
	gvr.Resource = resource
	l, err := client.Resource(gvr).Namespace(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: TrenchLabel + "=blue"})
	require.NoError(t, err)
	return l.Items
}
