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

func TestRecoveryReselectsLeftoverConnection(t *testing.T) {
	ctx := context.Background()
	reg, client := registryfake.New(), newFakeClient()
	// The NSMgr still has lb-1's connection from the proxy's previous run.
	mon := connstatesfake.New(&networkservice.Connection{
		Id:                         "nsmgr-side-id",
		NetworkService:             "lb",
		NetworkServiceEndpointName: "lb-1",
		Mechanism:                  &networkservice.Mechanism{Cls: "LOCAL", Type: "KERNEL", Parameters: map[string]string{"name": "old0"}},
		Context:                    &networkservice.ConnectionContext{IpContext: &networkservice.IPContext{SrcIpAddrs: []string{"172.16.1.10/24"}}},
		Path: &networkservice.Path{Index: 1, PathSegments: []*networkservice.PathSegment{
			{Id: id("lb-1"), Name: "proxy-a"}, {Id: "nsmgr-side-id", Name: "nsmgr"},
		}},
	})
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
			require.Equal(t, networkservice.State_RESELECT_REQUESTED, c.GetState(), "a recovered connection is reselected")
			require.Nil(t, c.GetMechanism(), "the forwarder must build a new data path")
			require.Equal(t, uint32(0), c.GetPath().GetIndex())
			require.Len(t, c.GetPath().GetPathSegments(), 2)
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
