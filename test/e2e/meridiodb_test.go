package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/ipam/meridio/meridiotest"
	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/bolt"
	"github.com/causeway-net/causeway/pkg/lab/labrun"
)

// rewriteAsMeridio replaces the lab's IPAM store (the IPAM stopped) with a
// database in Meridio's layout holding the same allocations, as a Meridio
// IPAM would have left them, and removes the store's snapshots.
func rewriteAsMeridio(t *testing.T, l *labrun.Lab) (children int) {
	t.Helper()
	st, err := bolt.Open(l.IPAMStore(), time.Second)
	require.NoError(t, err)
	var recs []store.Record
	require.NoError(t, st.Each(context.Background(), func(r store.Record) error {
		recs = append(recs, r)
		return nil
	}))
	require.NoError(t, st.Close())
	require.NoError(t, os.Remove(l.IPAMStore()))
	require.NoError(t, os.RemoveAll(filepath.Join(filepath.Dir(l.IPAMStore()), "snapshots")))

	w := meridiotest.Create(t, l.IPAMStore())
	family := func(k store.Key) int { // Meridio's: 0 for IPv4, 1 for IPv6
		if k.Family == 6 {
			return 1
		}
		return 0
	}
	trench := func(k store.Key) string { return k.Trench + "-" + strconv.Itoa(family(k)) }
	conduit := func(k store.Key) string { return k.Conduit + "-" + trench(k) }
	node := func(k store.Key) string { return k.Node + "-" + conduit(k) }
	for _, r := range recs { // parents first: Meridio's rows reference them
		switch k := r.Key; k.Level {
		case store.LevelTrench:
			w.Trench(k.Trench, family(k), r.Prefix.String())
		case store.LevelConduit:
			w.Add(trench(k), k.Conduit, r.Prefix.String(), r.Updated, false)
		case store.LevelNode:
			w.Add(conduit(k), k.Node, r.Prefix.String(), r.Updated, true)
		case store.LevelChild:
			w.Add(node(k), k.Child, r.Prefix.String(), r.Updated, k.Child != "bridge")
			children++
		}
	}
	w.Close()
	return children
}

// TestMovingFromMeridioIPAM: the lab's IPAM is replaced by one started on a
// Meridio IPAM database that holds the addresses of the lab's targets, the
// bridge and the LB connections. The IPAM imports it; after the proxy has
// restarted (so every child is allocated again through the import), every
// target has the address recorded for it and no address is on two
// interfaces.
func TestMovingFromMeridioIPAM(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before := targetAddrs(l)
	require.NoError(t, l.StopComponent("ipam", stopGrace))
	children := rewriteAsMeridio(t, l)
	require.Positive(t, children)

	require.NoError(t, l.StartIPAM())
	require.Contains(t, logOf(l, "ipam"), "imported the Meridio IPAM database")
	require.NoError(t, l.KillProxy())
	require.NoError(t, l.StartProxy())
	requireGreen(t, ctx, l, waitLong, "after the move to the imported store")
	requireUniqueAddrs(t, l)
	for name, a := range before {
		require.ElementsMatch(t, a, l.TargetAddrs(name), "%s keeps the address Meridio's database recorded", name)
	}
	entries, err := filepath.Glob(l.IPAMStore() + ".meridio-*")
	require.NoError(t, err)
	require.Len(t, entries, 1, "the original is kept beside the new store")
}
