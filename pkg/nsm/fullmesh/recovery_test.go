package fullmesh_test

import (
	"context"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/connstatesfake"
	"github.com/causeway-net/causeway/internal/registryfake"
	"github.com/causeway-net/causeway/pkg/nsm/fullmesh"
)

// leftover is lb-1's connection that the NSMgr still has from the
// proxy's previous run.
func leftover() *networkservice.Connection {
	return &networkservice.Connection{
		Id:                         "nsmgr-side-id",
		NetworkService:             "lb",
		NetworkServiceEndpointName: "lb-1",
		Mechanism: &networkservice.Mechanism{Cls: "LOCAL", Type: "KERNEL",
			Parameters: map[string]string{"name": "old0", "inodeURL": "inode://4/4026532000"}},
		Context: &networkservice.ConnectionContext{IpContext: &networkservice.IPContext{SrcIpAddrs: []string{"172.16.1.10/24"}}},
		Path: &networkservice.Path{Index: 1, PathSegments: []*networkservice.PathSegment{
			{Id: id("lb-1"), Name: "proxy-a"}, {Id: "nsmgr-side-id", Name: "nsmgr"},
		}},
	}
}

func TestRecoveryResumesLeftoverConnection(t *testing.T) {
	ctx := context.Background()
	reg, client := registryfake.New(), newFakeClient()
	mon := connstatesfake.New(leftover())
	_, _ = reg.Register(ctx, lb("lb-1", time.Time{}))
	_, _ = reg.Register(ctx, lb("lb-2", time.Time{}))
	h := start(t, reg, client, fullmesh.WithRecovery(mon))
	h.requireOpen(t, id("lb-1"), id("lb-2"))

	client.mu.Lock()
	defer client.mu.Unlock()
	require.Len(t, client.requests, 2)
	for _, r := range client.requests {
		c := r.GetConnection()
		switch c.GetNetworkServiceEndpointName() {
		case "lb-1":
			require.Equal(t, id("lb-1"), c.GetId())
			require.NotEqual(t, networkservice.State_RESELECT_REQUESTED, c.GetState(), "a recovered connection is refreshed, not reselected")
			require.Equal(t, "old0", c.GetMechanism().GetParameters()["name"], "on the same interface")
			require.Equal(t, "file:///proc/thread-self/ns/net", c.GetMechanism().GetParameters()["inodeURL"],
				"the namespace is passed anew, not by the previous run's inode")
			require.Equal(t, uint32(0), c.GetPath().GetIndex())
			require.Equal(t, leftover().GetPath().GetPathSegments()[1].GetId(), c.GetPath().GetPathSegments()[1].GetId(),
				"the NSMgr's segment is kept: the NSMgr and the forwarder know the connection")
			require.Equal(t, "node-a", c.GetLabels()["nodeName"])
		case "lb-2":
			require.NotEqual(t, networkservice.State_RESELECT_REQUESTED, c.GetState())
			require.Nil(t, c.GetPath(), "nothing to recover")
		default:
			t.Fatalf("unexpected request %v", c)
		}
	}
	require.ElementsMatch(t, []string{id("lb-1"), id("lb-2")}, mon.Asked())
}

func TestRecoveryReselectsWhenResumeFails(t *testing.T) {
	ctx := context.Background()
	reg, client := registryfake.New(), newFakeClient()
	client.failures = 1
	mon := connstatesfake.New(leftover())
	_, _ = reg.Register(ctx, lb("lb-1", time.Time{}))
	h := start(t, reg, client, fullmesh.WithRecovery(mon))
	h.requireOpen(t, id("lb-1"))

	client.mu.Lock()
	defer client.mu.Unlock()
	require.Len(t, client.requests, 2)
	first, second := client.requests[0].GetConnection(), client.requests[1].GetConnection()
	require.NotEqual(t, networkservice.State_RESELECT_REQUESTED, first.GetState(), "resumed first")
	require.Equal(t, networkservice.State_RESELECT_REQUESTED, second.GetState(), "then reselected")
	require.Nil(t, second.GetMechanism(), "the forwarder must build a new data path")
	require.Equal(t, uint32(0), second.GetPath().GetIndex())
	require.Len(t, second.GetPath().GetPathSegments(), 2)
}
