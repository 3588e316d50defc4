package kube

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/pkg/ipam"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func engineOn(t *testing.T, s *Store) (*ipam.Engine, error) {
	t.Helper()
	return ipam.New(context.Background(), s, ipam.Config{
		Trench: "blue", IPv4: &ipam.FamilyConfig{Pool: netip.MustParsePrefix("172.16.0.0/16"), ConduitLength: 20, NodeLength: 24},
		IPv6:   &ipam.FamilyConfig{Pool: netip.MustParsePrefix("fd00::/48"), ConduitLength: 56, NodeLength: 64},
		Logger: slog.New(slog.DiscardHandler),
	})
}

// The engine on the Kubernetes store: what it acknowledged is there for
// the next replica, same addresses; a replica whose view went stale cannot
// allocate.
func TestEngineOnKubeStore(t *testing.T) {
	api := newFakeAPI()
	s1 := open(t, api, "r1")
	e1, err := engineOn(t, s1)
	require.NoError(t, err)
	got := map[string]netip.Prefix{}
	for i := range 20 {
		for _, f := range []ipam.Family{ipam.IPv4, ipam.IPv6} {
			name := fmt.Sprintf("%s/ch%d", f, i)
			p, err := e1.Allocate(context.Background(), ipam.Subnet{Trench: "blue", Conduit: "c1", Node: fmt.Sprintf("w%d", i%3), Family: f}, name)
			require.NoError(t, err)
			got[name] = p
		}
	}

	// Another replica takes over (the first one is deposed but still runs).
	s2 := open(t, api, "r2")
	e2, err := engineOn(t, s2)
	require.NoError(t, err)
	for i := range 20 {
		for _, f := range []ipam.Family{ipam.IPv4, ipam.IPv6} {
			name := fmt.Sprintf("%s/ch%d", f, i)
			p, err := e2.Allocate(context.Background(), ipam.Subnet{Trench: "blue", Conduit: "c1", Node: fmt.Sprintf("w%d", i%3), Family: f}, name)
			require.NoError(t, err)
			assert.Equal(t, got[name], p, name)
		}
	}

	// The deposed replica can still write a block the new leader has not
	// written since it took over: its allocation is durable...
	w0 := ipam.Subnet{Trench: "blue", Conduit: "c1", Node: "w0", Family: ipam.IPv4}
	late, err := e1.Allocate(context.Background(), w0, "late")
	require.NoError(t, err)
	// ...and the new leader cannot build on a view without it: its next
	// write of that block fails, nothing is acknowledged, it reloads.
	_, err = e2.Allocate(context.Background(), w0, "new")
	require.ErrorIs(t, err, ipam.ErrUnavailable)
	<-s2.Fenced()
	e2.Close()

	s3 := open(t, api, "r3")
	e3, err := engineOn(t, s3)
	require.NoError(t, err)
	defer e3.Close()
	p, err := e3.Allocate(context.Background(), w0, "late")
	require.NoError(t, err)
	assert.Equal(t, late, p, "the deposed replica's acknowledged allocation is kept")
	p, err = e3.Allocate(context.Background(), w0, "new")
	require.NoError(t, err)
	assert.NotEqual(t, late, p)

	// Once the new leader wrote the block, the deposed replica cannot.
	_, err = e1.Allocate(context.Background(), w0, "later")
	require.ErrorIs(t, err, ipam.ErrUnavailable)
	<-s1.Fenced()
	e1.Close()
}
