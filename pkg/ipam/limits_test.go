package ipam

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
)

// TestLimitsRefuseGreedyCallers performs the attacks of finding 4 on the
// IPAM: one caller allocates IPv6 children without end on its node, and
// names new conduits until the pool would be gone. Past the limits each
// call is refused with ResourceExhausted, counted in
// causeway_ipam_limit_refusals_total and logged once per cause; what was
// allocated before stays, and other nodes and listed conduits still work.
func TestLimitsRefuseGreedyCallers(t *testing.T) {
	log := &testutil.JSONLog{}
	cfg := baseConfig()
	cfg.Logger = slog.New(slog.NewJSONHandler(log, nil))
	cfg.MaxConduits, cfg.MaxChildrenPerNode = 2, 3
	e := newEngine(t, memory.New(), cfg)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(e))
	c := serve(t, e, nil)
	ctx := context.Background()
	call := func(child, conduit, node string) error {
		_, err := c.Allocate(ctx, req(child, testTrench, conduit, node, ipamv1.IPFamily_IPV6))
		return err
	}

	for i := range 3 {
		require.NoError(t, call(fmt.Sprintf("id-%d-src", i), "lb", "worker-1"))
	}
	for i := 3; i < 10; i++ {
		err := call(fmt.Sprintf("id-%d-src", i), "lb", "worker-1")
		require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
		require.ErrorContains(t, err, `node "worker-1" of conduit "lb"`)
	}
	require.NoError(t, call("id-0-src", "lb", "worker-1"), "a renewal of what was allocated is no new child")
	require.NoError(t, call("id-0-src", "lb", "worker-2"), "another node has its own bound")

	require.NoError(t, call("bridge", "other", "worker-1"))
	for i := range 5 {
		err := call("bridge", fmt.Sprintf("unlisted-%d", i), "worker-1")
		require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
		require.ErrorContains(t, err, "has 2 conduits, the limit")
	}

	m := testutil.Gather(t, reg)
	require.Equal(t, 7.0, m[`causeway_ipam_limit_refusals_total{limit="children_per_node"}`])
	require.Equal(t, 5.0, m[`causeway_ipam_limit_refusals_total{limit="conduits_per_trench"}`])
	require.Equal(t, 2, log.Count("limit reached: request refused (logged once per cause)"), "once per cause:\n%s", log.String())
}
