package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
)

const ns = "causeway"

func open(t *testing.T, api *fakeAPI, id string) *Store {
	t.Helper()
	s, err := Open(context.Background(), Options{Client: api, Namespace: ns, Trench: "blue", Identity: id, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return s
}

var t0 = time.Date(2026, 12, 6, 5, 0, 0, 123456789, time.UTC)

func trenchPut(f uint8) store.Op {
	p := netip.MustParsePrefix("172.16.0.0/16")
	if f == 6 {
		p = netip.MustParsePrefix("fd00::/48")
	}
	return store.Op{Kind: store.OpPut, Record: store.Record{
		Key: store.Key{Level: store.LevelTrench, Trench: "blue", Family: f}, Prefix: p, Updated: t0,
		ConduitLength: uint8(p.Bits() + 4), NodeLength: uint8(p.Bits() + 8),
	}}
}

func put(level store.Level, f uint8, c, n, ch, prefix string, updated time.Time) store.Op {
	return store.Op{Kind: store.OpPut, Record: store.Record{
		Key: store.Key{Level: level, Trench: "blue", Family: f, Conduit: c, Node: n, Child: ch}, Prefix: netip.MustParsePrefix(prefix), Updated: updated,
	}}
}

func del(level store.Level, f uint8, c, n, ch string) store.Op {
	return store.Op{Kind: store.OpDelete, Record: store.Record{Key: store.Key{Level: level, Trench: "blue", Family: f, Conduit: c, Node: n, Child: ch}}}
}

// randomOps is a valid history of changes like the engine's: trench
// records first, then conduits, nodes and children put (new or renewed)
// and deleted at random.
func randomOps(r *rand.Rand, n int) [][]store.Op {
	batches := [][]store.Op{{trenchPut(4), trenchPut(6)}}
	type nodeRef struct {
		f    uint8
		c, n string
		pfx  netip.Prefix
	}
	var nodes []nodeRef
	conduits := map[string]bool{}
	made := 0 // node subnets carved so far: each gets a prefix of its own
	for i := 0; i < n; i++ {
		var batch []store.Op
		for j := 0; j < 1+r.IntN(20); j++ {
			f := uint8(4)
			if r.IntN(2) == 0 {
				f = 6
			}
			c := fmt.Sprintf("c%d", r.IntN(3))
			ck := fmt.Sprintf("%d/%s", f, c)
			if !conduits[ck] {
				conduits[ck] = true
				batch = append(batch, put(store.LevelConduit, f, c, "", "", map[uint8]string{4: "172.16.0.0/20", 6: "fd00::/52"}[f], time.Time{}))
			}
			when := t0.Add(time.Duration(r.IntN(1000)) * time.Millisecond)
			switch x := r.IntN(10); {
			case x < 2 || len(nodes) == 0:
				idx := made
				made++
				pfx := netip.MustParsePrefix(fmt.Sprintf("fd00:0:0:%x::/64", idx))
				if f == 4 {
					pfx = netip.MustParsePrefix(fmt.Sprintf("172.16.%d.0/24", idx))
				}
				nodes = append(nodes, nodeRef{f, c, fmt.Sprintf("n%d", idx), pfx})
				batch = append(batch, put(store.LevelNode, f, c, fmt.Sprintf("n%d", idx), "", pfx.String(), when))
			case x < 8:
				nd := nodes[r.IntN(len(nodes))]
				a := nd.pfx.Addr().Next()
				for k := r.IntN(5); k > 0; k-- {
					a = a.Next()
				}
				batch = append(batch, put(store.LevelChild, nd.f, nd.c, nd.n, fmt.Sprintf("ch%d", r.IntN(8)), netip.PrefixFrom(a, a.BitLen()).String(), when))
			case x < 9:
				nd := nodes[r.IntN(len(nodes))]
				batch = append(batch, del(store.LevelChild, nd.f, nd.c, nd.n, fmt.Sprintf("ch%d", r.IntN(8))))
			default:
				k := r.IntN(len(nodes))
				nd := nodes[k]
				batch = append(batch, del(store.LevelNode, nd.f, nd.c, nd.n, ""))
				nodes = slices.Delete(nodes, k, k+1)
			}
		}
		batches = append(batches, batch)
	}
	return batches
}

// The Kubernetes store keeps what the reference store keeps, through any
// history of changes, and a store opened later on the same server loads
// all of it.
func TestKeepsWhatMemoryKeeps(t *testing.T) {
	for seed := range uint64(20) {
		api := newFakeAPI()
		s := open(t, api, "r1")
		ref := memory.New()
		for _, b := range randomOps(rand.New(rand.NewPCG(seed, 7)), 40) {
			require.NoError(t, ref.Apply(context.Background(), b))
			require.NoError(t, s.Apply(context.Background(), b))
		}
		want, err := ref.Load(context.Background())
		require.NoError(t, err)
		got, err := s.Load(context.Background())
		require.NoError(t, err)
		assertSame(t, want, got, "seed %d, same store", seed)
		got, err = open(t, api, "r2").Load(context.Background())
		require.NoError(t, err)
		assertSame(t, want, got, "seed %d, reopened", seed)
	}
}

func assertSame(t *testing.T, want, got []store.Record, msg ...any) {
	t.Helper()
	require.Equal(t, len(want), len(got), msg...)
	for i := range want {
		assert.Equal(t, want[i].Key, got[i].Key, msg...)
		assert.Equal(t, want[i].Prefix, got[i].Prefix, msg...)
		assert.True(t, want[i].Updated.Equal(got[i].Updated), "%v: %v != %v", want[i].Key, want[i].Updated, got[i].Updated)
		assert.Equal(t, [2]uint8{want[i].ConduitLength, want[i].NodeLength}, [2]uint8{got[i].ConduitLength, got[i].NodeLength}, msg...)
	}
}

func setup(t *testing.T, api *fakeAPI, s *Store) {
	t.Helper()
	require.NoError(t, s.Apply(context.Background(), []store.Op{
		trenchPut(4),
		put(store.LevelConduit, 4, "c", "", "", "172.16.0.0/20", time.Time{}),
		put(store.LevelNode, 4, "c", "w1", "", "172.16.0.0/24", t0),
		put(store.LevelNode, 4, "c", "w2", "", "172.16.1.0/24", t0),
	}))
	api.writeLog()
}

// A commit is one write per object it changes, whatever the number of
// changes in it.
func TestOneWritePerObject(t *testing.T) {
	api := newFakeAPI()
	s := open(t, api, "r1")
	setup(t, api, s)
	var batch []store.Op
	for i := 1; i <= 100; i++ {
		node, pfx := "w1", fmt.Sprintf("172.16.0.%d/32", i)
		if i%2 == 0 {
			node, pfx = "w2", fmt.Sprintf("172.16.1.%d/32", i)
		}
		batch = append(batch, put(store.LevelChild, 4, "c", node, fmt.Sprintf("ch%d", i), pfx, t0))
	}
	before := s.Writes()
	require.NoError(t, s.Apply(context.Background(), batch))
	assert.ElementsMatch(t, []string{
		"update ipamblocks blue-ipv4-172-16-0-0-24", "update ipamblocks blue-ipv4-172-16-1-0-24",
	}, api.writeLog())
	assert.Equal(t, uint64(2), s.Writes()-before)
}

// A replica whose view is old cannot write: its write fails with Conflict
// (or AlreadyExists), the store is fenced, and it stays fenced.
func TestStaleWriterIsFenced(t *testing.T) {
	api := newFakeAPI()
	old := open(t, api, "r1")
	setup(t, api, old)
	// A new leader takes over: it loads and claims the pool.
	cur := open(t, api, "r2")
	require.NoError(t, cur.Apply(context.Background(), []store.Op{put(store.LevelChild, 4, "c", "w1", "a", "172.16.0.5/32", t0)}))

	// The deposed replica hands out the same address to another child: its
	// write names an old version of the block.
	err := old.Apply(context.Background(), []store.Op{put(store.LevelChild, 4, "c", "w1", "b", "172.16.0.5/32", t0)})
	require.ErrorIs(t, err, ErrFenced)
	select {
	case <-old.Fenced():
	default:
		t.Fatal("Fenced not closed")
	}
	// Its pool writes fail too (the claim changed the pool), and nothing
	// it tries later goes through.
	err = old.Apply(context.Background(), []store.Op{put(store.LevelNode, 4, "c", "w3", "", "172.16.2.0/24", t0)})
	require.ErrorIs(t, err, ErrFenced)
	_, err = old.Load(context.Background())
	require.ErrorIs(t, err, ErrFenced)

	recs, err := open(t, api, "r3").Load(context.Background())
	require.NoError(t, err)
	var owners []string
	for _, r := range recs {
		if r.Key.Level == store.LevelChild {
			owners = append(owners, r.Key.Child+"="+r.Prefix.String())
		}
	}
	assert.Equal(t, []string{"a=172.16.0.5/32"}, owners)
}

// A deposed replica's write that lands before the new leader touches the
// block is not lost: the new leader's next write to the block fails, and
// a reload sees it.
func TestDeposedWriteIsSeenNotOverwritten(t *testing.T) {
	api := newFakeAPI()
	old := open(t, api, "r1")
	setup(t, api, old)
	cur := open(t, api, "r2")
	require.NoError(t, old.Apply(context.Background(), []store.Op{put(store.LevelChild, 4, "c", "w1", "a", "172.16.0.5/32", t0)}))
	err := cur.Apply(context.Background(), []store.Op{put(store.LevelChild, 4, "c", "w1", "b", "172.16.0.5/32", t0)})
	require.ErrorIs(t, err, ErrFenced)
	recs, err := open(t, api, "r2").Load(context.Background())
	require.NoError(t, err)
	assert.Contains(t, recs, store.Record{Key: store.Key{Level: store.LevelChild, Trench: "blue", Family: 4, Conduit: "c", Node: "w1", Child: "a"},
		Prefix: netip.MustParsePrefix("172.16.0.5/32"), Updated: t0})
}

// Two replicas cannot carve the same node subnet: node subnets are
// carved in the pool, written conditionally.
func TestNodeSubnetCarvedOnce(t *testing.T) {
	api := newFakeAPI()
	a := open(t, api, "")
	setup(t, api, a)
	b := open(t, api, "")
	require.NoError(t, a.Apply(context.Background(), []store.Op{put(store.LevelNode, 4, "c", "x", "", "172.16.2.0/24", t0)}))
	err := b.Apply(context.Background(), []store.Op{put(store.LevelNode, 4, "c", "y", "", "172.16.2.0/24", t0)})
	require.ErrorIs(t, err, ErrFenced)
}

// Writes are ordered so that a commit cut short leaves a pool index that
// covers every block: a removed node's block goes before its index entry,
// a new node's entry comes before its block.
func TestPartialCommitKeepsIndexCoveringBlocks(t *testing.T) {
	api := newFakeAPI()
	s := open(t, api, "r1")
	setup(t, api, s)
	require.NoError(t, s.Apply(context.Background(), []store.Op{put(store.LevelChild, 4, "c", "w1", "a", "172.16.0.5/32", t0)}))
	api.writeLog()
	down := errors.New("connection refused")
	api.fail = func(verb, res, _ string) error {
		if res == "ipampools" {
			return down
		}
		return nil
	}
	err := s.Apply(context.Background(), []store.Op{
		del(store.LevelNode, 4, "c", "w1", ""),
		put(store.LevelNode, 4, "c", "w3", "", "172.16.2.0/24", t0),
		put(store.LevelChild, 4, "c", "w3", "b", "172.16.2.5/32", t0),
	})
	require.ErrorIs(t, err, down)
	require.NotErrorIs(t, err, ErrFenced, "a failed call is not a conflict")
	assert.Equal(t, []string{"delete ipamblocks blue-ipv4-172-16-0-0-24"}, api.writeLog(), "the pool failed: no new block")

	assert.Equal(t, []string{"w1/", "w2/"}, nodesAndChildren(t, api), "w1's entry stays without its addresses; w3 is not there")

	// The same commit again, once the pool can be written, completes it.
	api.fail = nil
	require.NoError(t, s.Apply(context.Background(), []store.Op{
		del(store.LevelNode, 4, "c", "w1", ""),
		put(store.LevelNode, 4, "c", "w3", "", "172.16.2.0/24", t0),
		put(store.LevelChild, 4, "c", "w3", "b", "172.16.2.5/32", t0),
	}))
	assert.Equal(t, []string{"w2/", "w3/", "w3/b"}, nodesAndChildren(t, api))
}

// nodesAndChildren lists node/child of the node and child records a new
// store loads.
func nodesAndChildren(t *testing.T, api *fakeAPI) []string {
	t.Helper()
	recs, err := open(t, api, "").Load(context.Background())
	require.NoError(t, err)
	var keys []string
	for _, r := range recs {
		if r.Key.Level >= store.LevelNode {
			keys = append(keys, r.Key.Node+"/"+r.Key.Child)
		}
	}
	return keys
}

// A record that cannot be read fails Open: a store never serves on a
// partial view.
func TestUnreadableRecordFailsOpen(t *testing.T) {
	api := newFakeAPI()
	s := open(t, api, "r1")
	setup(t, api, s)
	obj := api.objects["ipamblocks/"+ns+"/blue-ipv4-172-16-0-0-24"]
	obj.Object["spec"].(map[string]any)["prefix"] = "not a prefix"
	_, err := Open(context.Background(), Options{Client: api, Namespace: ns, Trench: "blue", Logger: slog.New(slog.DiscardHandler)})
	require.ErrorContains(t, err, "blue-ipv4-172-16-0-0-24")
}

// Only Conflict, AlreadyExists and NotFound fence; other failures are
// retried by the writer.
func TestFenceOnlyOnChangedObjects(t *testing.T) {
	gr := schema.GroupResource{Group: Group, Resource: "ipamblocks"}
	for _, tc := range []struct {
		err    error
		fenced bool
	}{
		{apierrors.NewConflict(gr, "x", errors.New("changed")), true},
		{apierrors.NewAlreadyExists(gr, "x"), true},
		{apierrors.NewNotFound(gr, "x"), true},
		{apierrors.NewServiceUnavailable("etcd down"), false},
		{apierrors.NewTimeoutError("slow", 1), false},
		{context.DeadlineExceeded, false},
	} {
		s := &Store{o: Options{Logger: slog.New(slog.DiscardHandler)}, fencedCh: make(chan struct{})}
		assert.Equal(t, tc.fenced, errors.Is(s.fence(tc.err), ErrFenced), "%v", tc.err)
	}
}

func TestObjectNames(t *testing.T) {
	assert.Equal(t, "blue-ipv4", poolName("blue", 4))
	assert.Equal(t, "blue-ipv6-fd00-0-0-1---64", blockName("blue", 6, netip.MustParsePrefix("fd00:0:0:1::/64")))
	long := poolName("Not_A_Name", 4)
	assert.Regexp(t, `^t[0-9a-f]{16}-ipv4$`, long)
}

// On an API server whose IPAMBlock CRD predates spec.leases (Helm never
// upgrades a chart's CRDs), which would drop every address of a block
// written, no block is written and the commit fails saying what to do.
func TestOldCRDRefusedBeforeAnyBlockWrite(t *testing.T) {
	api := newFakeAPI()
	api.oldCRD = true
	s := open(t, api, "r1")
	err := s.Apply(context.Background(), []store.Op{
		trenchPut(4),
		put(store.LevelConduit, 4, "c", "", "", "172.16.0.0/20", time.Time{}),
		put(store.LevelNode, 4, "c", "w1", "", "172.16.0.0/24", t0),
		put(store.LevelChild, 4, "c", "w1", "a", "172.16.0.5/32", t0),
	})
	require.ErrorContains(t, err, "apply deployments/helm/causeway/crds/ipam.causeway.net.yaml")
	require.NotErrorIs(t, err, ErrFenced)
	assert.Empty(t, api.writeLog(), "nothing written")

	// With the CRD applied, the same commit goes through.
	api.mu.Lock()
	api.oldCRD = false
	api.mu.Unlock()
	require.NoError(t, s.Apply(context.Background(), []store.Op{
		trenchPut(4),
		put(store.LevelConduit, 4, "c", "", "", "172.16.0.0/20", time.Time{}),
		put(store.LevelNode, 4, "c", "w1", "", "172.16.0.0/24", t0),
		put(store.LevelChild, 4, "c", "w1", "a", "172.16.0.5/32", t0),
	}))
	assert.Equal(t, []string{"w1/", "w1/a"}, nodesAndChildren(t, api))
}
