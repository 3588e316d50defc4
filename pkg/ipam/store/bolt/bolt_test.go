package bolt

import (
	"context"
	"fmt"
	"math/rand"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// randomOp makes a put or delete on a small tree so that deletes often hit
// subtrees with entries both compacted and still in the journal.
func randomOp(r *rand.Rand) store.Op {
	k := store.Key{Level: store.Level(2 + r.Intn(3)), Trench: "t", Family: uint8(4 + 2*r.Intn(2)),
		Conduit: fmt.Sprintf("c%d", r.Intn(3)), Node: fmt.Sprintf("n%d", r.Intn(3)), Child: fmt.Sprintf("x%d", r.Intn(5))}
	if r.Intn(4) == 0 {
		return store.Op{Kind: store.OpDelete, Record: store.Record{Key: k}}
	}
	p := netip.MustParsePrefix("10.0.0.0/24")
	if k.Family == 6 {
		p = netip.MustParsePrefix("fd00::/64")
	}
	return store.Op{Kind: store.OpPut, Record: store.Record{Key: k, Prefix: p,
		Updated: time.Unix(int64(r.Intn(1000)), 0).UTC()}}
}

// TestMatchesMemoryModel: random batches applied to bolt and to the memory
// store load the same records, across compactions and reopenings.
func TestMatchesMemoryModel(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	path := filepath.Join(t.TempDir(), "dir", "db")
	s, err := Open(path, time.Second)
	require.NoError(t, err)
	model := memory.New()
	ctx := context.Background()
	for round := 0; round < 300; round++ {
		ops := make([]store.Op, 1+r.Intn(20))
		for i := range ops {
			ops[i] = randomOp(r)
		}
		require.NoError(t, s.Apply(ctx, ops))
		require.NoError(t, model.Apply(ctx, ops))
		switch r.Intn(10) {
		case 0:
			require.NoError(t, s.compact())
		case 1:
			require.NoError(t, s.Close())
			s, err = Open(path, time.Second) // compacts on open
			require.NoError(t, err)
		}
		want, err := model.Load(ctx)
		require.NoError(t, err)
		got, err := s.Load(ctx)
		require.NoError(t, err)
		require.Equal(t, want, got, "round %d", round)
	}
	require.NoError(t, s.Close())
}

func TestCodecRoundTrip(t *testing.T) {
	for _, r := range []store.Record{
		{Key: store.Key{Level: store.LevelTrench, Trench: "t", Family: 4}, Prefix: netip.MustParsePrefix("169.255.0.0/16"),
			Updated: time.Unix(5, 6).UTC(), ConduitLength: 20, NodeLength: 24},
		{Key: store.Key{Level: store.LevelNode, Trench: "t", Family: 6, Conduit: "c", Node: ""}, Prefix: netip.MustParsePrefix("fd00::/64")},
		{Key: store.Key{Level: store.LevelChild, Trench: "t", Family: 6, Conduit: "c", Node: "", Child: "bridge"}, Prefix: netip.MustParsePrefix("fd00::1/128")},
	} {
		k, err := store.DecodeKey(store.EncodeKey(r.Key))
		require.NoError(t, err)
		require.Equal(t, r.Key, k)
		v, err := store.EncodeValue(r)
		require.NoError(t, err)
		got, err := store.DecodeValue(k, v)
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
	_, err := store.DecodeKey([]byte("t\x009"))
	require.Error(t, err)
	_, err = store.DecodeValue(store.Key{}, []byte{1, 2})
	require.Error(t, err)
}
