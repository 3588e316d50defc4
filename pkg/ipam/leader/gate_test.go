package leader

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func req(conduit, name string) *ipamv1.Child {
	return &ipamv1.Child{Name: name, Subnet: &ipamv1.Subnet{
		Conduit: &nspv1.Conduit{Name: conduit, Trench: &nspv1.Trench{Name: "blue"}}, Node: "w1", IpFamily: ipamv1.IPFamily_IPV4,
	}}
}

func newEngine(t *testing.T) *ipam.Engine {
	t.Helper()
	return engineOn(t, memory.New())
}

func engineOn(t *testing.T, st *memory.Store) *ipam.Engine {
	t.Helper()
	e, err := ipam.New(context.Background(), st, ipam.Config{
		Trench: "blue", IPv4: &ipam.FamilyConfig{Pool: netip.MustParsePrefix("172.16.0.0/16"), ConduitLength: 20, NodeLength: 24},
		Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e
}

// Without an engine every call is refused with Unavailable (a replica that
// does not lead never guesses); with one it serves; shut, it refuses again.
func TestGateRefusesUnlessServing(t *testing.T) {
	var changes []bool
	g := &Gate{OnChange: func(s bool) { changes = append(changes, s) }}
	_, err := g.Allocate(context.Background(), req("c1", "a"))
	assert.Equal(t, codes.Unavailable, status.Code(err))
	_, err = g.Release(context.Background(), req("c1", "a"))
	assert.Equal(t, codes.Unavailable, status.Code(err))

	e := newEngine(t)
	g.Open(e)
	p, err := g.Allocate(context.Background(), req("c1", "a"))
	require.NoError(t, err)
	assert.Equal(t, int32(24), p.GetPrefixLength())
	assert.True(t, g.Serving())

	assert.Same(t, e, g.Shut())
	assert.False(t, g.Serving())
	_, err = g.Allocate(context.Background(), req("c1", "a"))
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Equal(t, []bool{true, false}, changes)
}

// A new engine gets the configuration server's last conduit list before it
// serves: a conduit the list dropped stays draining across a failover.
func TestGatePassesLastConduitList(t *testing.T) {
	st := memory.New()
	g := &Gate{}
	g.Open(engineOn(t, st))
	for _, c := range []string{"c1", "c2"} {
		_, err := g.Allocate(context.Background(), req(c, "a"))
		require.NoError(t, err)
	}
	g.SyncConduits([]string{"c1"})
	g.Shut().Close()

	g.Open(engineOn(t, st))
	_, err := g.Allocate(context.Background(), req("c1", "b"))
	require.NoError(t, err)
	_, err = g.Allocate(context.Background(), req("c2", "b"))
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "c2 left the list: draining, %v", err)
}

// The metrics say who serves: causeway_ipam_serving is 1 only while an
// engine serves here, causeway_ipam_leader names the Lease's holder.
func TestGateMetricsSayWhoServes(t *testing.T) {
	g := &Gate{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(g)
	gauges := func() map[string]float64 { return testutil.Gather(t, reg) }
	assert.Equal(t, map[string]float64{"causeway_ipam_serving": 0}, gauges(), "no leader known yet")
	g.SetLeader("ipam-1")
	assert.Equal(t, map[string]float64{"causeway_ipam_serving": 0, `causeway_ipam_leader{leader="ipam-1"}`: 1}, gauges())
	g.SetLeader("ipam-0")
	g.Open(newEngine(t))
	got := gauges()
	assert.Equal(t, 1.0, got["causeway_ipam_serving"])
	assert.Equal(t, 1.0, got[`causeway_ipam_leader{leader="ipam-0"}`])
	assert.NotContains(t, got, `causeway_ipam_leader{leader="ipam-1"}`)
	assert.Contains(t, got, `causeway_ipam_conduits_draining{family="ipv4",trench="blue"}`, "the engine's metrics while it serves")
	g.Shut()
	assert.Equal(t, 0.0, gauges()["causeway_ipam_serving"])
}
