package egress_test

import (
	"context"
	"errors"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/inject/injecterror"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/pkg/nsm/chain/egress"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func req(id string) *networkservice.NetworkServiceRequest {
	return &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: id}}
}

func TestServingWhileAnyConnection(t *testing.T) {
	var reports []bool
	cli := chain.NewNetworkServiceClient(egress.NewClient(func(s bool) { reports = append(reports, s) }))
	ctx := context.Background()

	a, err := cli.Request(ctx, req("a"))
	require.NoError(t, err)
	b, err := cli.Request(ctx, req("b"))
	require.NoError(t, err)
	_, err = cli.Request(ctx, req("a")) // refresh
	require.NoError(t, err)
	require.Equal(t, []bool{true}, reports)

	_, err = cli.Close(ctx, a)
	require.NoError(t, err)
	require.Equal(t, []bool{true}, reports, "still one connection left")
	_, err = cli.Close(ctx, a) // double close changes nothing
	require.NoError(t, err)
	_, err = cli.Close(ctx, b)
	require.NoError(t, err)
	require.Equal(t, []bool{true, false}, reports)

	_, err = cli.Request(ctx, req("c"))
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true}, reports)
}

func TestFailedRequestIsNotCounted(t *testing.T) {
	var reports []bool
	cli := chain.NewNetworkServiceClient(
		egress.NewClient(func(s bool) { reports = append(reports, s) }),
		injecterror.NewClient(injecterror.WithRequestErrorTimes(0), injecterror.WithError(errors.New("no lb"))),
	)
	_, err := cli.Request(context.Background(), req("a"))
	require.Error(t, err)
	require.Empty(t, reports)
}
