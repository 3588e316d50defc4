package mtu_test

import (
	"context"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/pkg/nsm/chain/mtu"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestServerOverwritesMTU(t *testing.T) {
	srv := chain.NewNetworkServiceServer(mtu.NewServer(mtu.WithMTU(1450)))
	conn, err := srv.Request(context.Background(), &networkservice.NetworkServiceRequest{
		Connection: &networkservice.Connection{Id: "a", Context: &networkservice.ConnectionContext{MTU: 9000}},
	})
	require.NoError(t, err)
	require.Equal(t, uint32(1450), conn.GetContext().GetMTU())
}

func TestClientSetsMTUOnEmptyContext(t *testing.T) {
	cli := chain.NewNetworkServiceClient(mtu.NewClient(mtu.WithMTU(1400)))
	conn, err := cli.Request(context.Background(), &networkservice.NetworkServiceRequest{
		Connection: &networkservice.Connection{Id: "a"},
	})
	require.NoError(t, err)
	require.Equal(t, uint32(1400), conn.GetContext().GetMTU())
}

func TestZeroMTULeavesContext(t *testing.T) {
	cli := chain.NewNetworkServiceClient(mtu.NewClient())
	conn, err := cli.Request(context.Background(), &networkservice.NetworkServiceRequest{
		Connection: &networkservice.Connection{Id: "a", Context: &networkservice.ConnectionContext{MTU: 1500}},
	})
	require.NoError(t, err)
	require.Equal(t, uint32(1500), conn.GetContext().GetMTU())
}
