package netnsurl_test

import (
	"context"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/checks/checkrequest"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/pkg/nsm/chain/netnsurl"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func kernelMechanism() *networkservice.Mechanism {
	return &networkservice.Mechanism{Type: kernelmech.MECHANISM, Cls: "LOCAL", Parameters: map[string]string{}}
}

func request() *networkservice.NetworkServiceRequest {
	return &networkservice.NetworkServiceRequest{
		Connection: &networkservice.Connection{Id: "c", Mechanism: kernelMechanism()},
		MechanismPreferences: []*networkservice.Mechanism{
			kernelMechanism(),
			{Type: "MEMIF", Parameters: map[string]string{}},
		},
	}
}

func TestClientPointsPreferencesAndConnection(t *testing.T) {
	var seen *networkservice.NetworkServiceRequest
	c := chain.NewNetworkServiceClient(netnsurl.NewClient("/var/run/netns/x"),
		checkrequest.NewClient(t, func(_ *testing.T, r *networkservice.NetworkServiceRequest) { seen = r.Clone() }))
	_, err := c.Request(context.Background(), request())
	require.NoError(t, err)
	require.Equal(t, "file:///var/run/netns/x", seen.GetConnection().GetMechanism().GetParameters()[kernelmech.NetNSURL])
	prefs := seen.GetMechanismPreferences()
	require.Equal(t, "file:///var/run/netns/x", prefs[0].GetParameters()[kernelmech.NetNSURL])
	require.NotContains(t, prefs[1].GetParameters(), kernelmech.NetNSURL, "only kernel mechanisms are pointed")
}

func TestServerPointsConnection(t *testing.T) {
	var seen *networkservice.NetworkServiceRequest
	s := chain.NewNetworkServiceServer(netnsurl.NewServer("/var/run/netns/y"),
		checkrequest.NewServer(t, func(_ *testing.T, r *networkservice.NetworkServiceRequest) { seen = r.Clone() }))
	_, err := s.Request(context.Background(), request())
	require.NoError(t, err)
	require.Equal(t, "file:///var/run/netns/y", seen.GetConnection().GetMechanism().GetParameters()[kernelmech.NetNSURL])
}

func TestEmptyPathChangesNothing(t *testing.T) {
	var seen *networkservice.NetworkServiceRequest
	s := chain.NewNetworkServiceServer(netnsurl.NewServer(""),
		checkrequest.NewServer(t, func(_ *testing.T, r *networkservice.NetworkServiceRequest) { seen = r.Clone() }))
	_, err := s.Request(context.Background(), request())
	require.NoError(t, err)
	require.NotContains(t, seen.GetConnection().GetMechanism().GetParameters(), kernelmech.NetNSURL)
}
