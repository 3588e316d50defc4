package keepmechanism_test

import (
	"context"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/memif"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/null"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/pkg/nsm/chain/keepmechanism"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newEndpoint() networkservice.NetworkServiceServer {
	return chain.NewNetworkServiceServer(
		metadata.NewServer(),
		keepmechanism.NewServer(),
		mechanisms.NewServer(map[string]networkservice.NetworkServiceServer{kernelmech.MECHANISM: kernel.NewServer()}),
	)
}

func fromPreferences(id string, types ...string) *networkservice.NetworkServiceRequest {
	req := &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: id, NetworkService: "svc"}}
	for _, t := range types {
		req.MechanismPreferences = append(req.MechanismPreferences, &networkservice.Mechanism{Cls: "LOCAL", Type: t})
	}
	return req
}

func ifname(t *testing.T, conn *networkservice.Connection) string {
	t.Helper()
	km := kernelmech.ToMechanism(conn.GetMechanism())
	require.NotNil(t, km)
	return km.GetInterfaceName()
}

// A refresh that comes with preferences only (a restarted forwarder) gets
// the interface name the connection already had; a new connection, or one
// that was closed, gets a fresh one.
func TestRefreshWithoutMechanismKeepsTheInterfaceName(t *testing.T) {
	ep := newEndpoint()
	ctx := context.Background()
	first, err := ep.Request(ctx, fromPreferences("c1", kernelmech.MECHANISM))
	require.NoError(t, err)
	name := ifname(t, first)
	require.NotEmpty(t, name)

	again, err := ep.Request(ctx, fromPreferences("c1", kernelmech.MECHANISM))
	require.NoError(t, err)
	require.Equal(t, name, ifname(t, again), "same connection, same interface")

	other, err := ep.Request(ctx, fromPreferences("c2", kernelmech.MECHANISM))
	require.NoError(t, err)
	require.NotEqual(t, name, ifname(t, other), "another connection gets its own name")

	_, err = ep.Close(ctx, again)
	require.NoError(t, err)
	reopened, err := ep.Request(ctx, fromPreferences("c1", kernelmech.MECHANISM))
	require.NoError(t, err)
	require.NotEqual(t, name, ifname(t, reopened), "a closed connection starts afresh")
}

// A refresh that no longer offers the kept mechanism's type negotiates
// again.
func TestKeptMechanismNotOfferedAnyMore(t *testing.T) {
	ep := chain.NewNetworkServiceServer(
		metadata.NewServer(),
		keepmechanism.NewServer(),
		mechanisms.NewServer(map[string]networkservice.NetworkServiceServer{
			kernelmech.MECHANISM: kernel.NewServer(),
			memif.MECHANISM:      null.NewServer(),
		}),
	)
	ctx := context.Background()
	_, err := ep.Request(ctx, fromPreferences("c1", kernelmech.MECHANISM))
	require.NoError(t, err)
	resp, err := ep.Request(ctx, fromPreferences("c1", memif.MECHANISM))
	require.NoError(t, err)
	require.Equal(t, memif.MECHANISM, resp.GetMechanism().GetType())
}
