package liveness_test

import (
	"context"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/connstatesfake"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/chain/liveness"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

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
	check := liveness.Check(mon, func(*networkservice.Connection) bool { return lost }, nil, nil)
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

// remote is a connection to an endpoint served by another NSMgr: its path
// runs through this node's NSMgr and forwarder, then the other node's.
func remote(state networkservice.State) *networkservice.Connection {
	conn := connection(state)
	conn.Path.PathSegments = append(conn.GetPath().GetPathSegments(),
		&networkservice.PathSegment{Id: "f1", Name: "forwarder-0"},
		&networkservice.PathSegment{Id: "m2", Name: "nsmgr-1"},
		&networkservice.PathSegment{Id: "f2", Name: "forwarder-1"},
		&networkservice.PathSegment{Id: "e1", Name: "lb-1"})
	return conn
}

// local is a connection to an endpoint this node's NSMgr serves itself.
func local(state networkservice.State) *networkservice.Connection {
	conn := connection(state)
	conn.Path.PathSegments = append(conn.GetPath().GetPathSegments(),
		&networkservice.PathSegment{Id: "f1", Name: "forwarder-0"},
		&networkservice.PathSegment{Id: "e1", Name: "lb-0"})
	return conn
}

// The NSMgr's "down" (or its forgetting, from the run that established the
// connection) may only mean that a hop of the control plane was replaced
// (the forwarder of either node, the other node's NSMgr): the connection is
// kept while the far end answers on the data path, wherever it is, and
// believed dead once it is silent. A lost link is dead whatever answers.
func TestCheckWhoseWord(t *testing.T) {
	ctx := context.Background()
	lost, answers := false, true
	mon := connstatesfake.New()
	thisRun := func(*networkservice.Connection) bool { return true }
	check := liveness.Check(mon, func(*networkservice.Connection) bool { return lost }, thisRun,
		func(*networkservice.Connection) bool { return answers })

	for _, reported := range [][]*networkservice.Connection{{remote(networkservice.State_DOWN)}, nil} {
		mon.Set(reported...)
		require.True(t, check(ctx, remote(networkservice.State_UP)), "another node's LB answers: keep the data path (%v)", reported)
		require.True(t, check(ctx, local(networkservice.State_UP)), "our NSMgr's own LB answers: our forwarder may be what went (%v)", reported)
	}
	answers = false
	mon.Set(remote(networkservice.State_DOWN))
	require.False(t, check(ctx, remote(networkservice.State_UP)), "down and silent: the far end is gone")
	require.False(t, check(ctx, local(networkservice.State_UP)), "down and silent: our NSMgr's own LB is gone")
	mon.Set(remote(networkservice.State_UP))
	require.True(t, check(ctx, remote(networkservice.State_UP)), "up: alive without an answer")

	answers, lost = true, true
	require.False(t, check(ctx, remote(networkservice.State_UP)), "the link is gone: an answer cannot come through it")

	lost = false
	mon.Set(remote(networkservice.State_DOWN))
	nothing := liveness.Check(mon, nil, thisRun, nil)
	require.False(t, nothing(ctx, remote(networkservice.State_UP)), "nothing answers (the datapath check off): the NSMgr is believed")
}
