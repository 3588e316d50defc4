package liveness_test

import (
	"context"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/internal/connstatesfake"
	"github.com/causeway-net/causeway/pkg/nsm/chain/liveness"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func connection(state networkservice.State) *networkservice.Connection {
	return &networkservice.Connection{Id: "c1", State: state, Path: &networkservice.Path{
		PathSegments: []*networkservice.PathSegment{{Id: "c1", Name: "proxy"}, {Id: "m1", Name: "nsmgr"}},
	}}
}

// An NSMgr that answers is believed; one that does not leaves the data path
// alone unless its link is gone.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	lost := false
	mon := connstatesfake.New()
	check := liveness.Check(mon, func(*networkservice.Connection) bool { return lost }, nil)
	conn := connection(networkservice.State_UP)

	mon.SetAway(true)
	require.True(t, check(ctx, conn), "NSMgr away: keep the data path")
	require.Equal(t, []string{"c1"}, mon.Asked(), "asked about our own path segment")

	mon.SetAway(false)
	mon.Set(connection(networkservice.State_DOWN))
	require.False(t, check(ctx, conn), "NSMgr answers: down")
	mon.Set()
	require.False(t, check(ctx, conn), "NSMgr answers: it does not know the connection")
	mon.Set(connection(networkservice.State_UP))
	require.True(t, check(ctx, conn), "NSMgr answers: up")

	lost = true
	mon.SetAway(true)
	require.False(t, check(ctx, conn), "the link is gone: nothing to keep")
}
