package nsmtest

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/api/pkg/api/networkservice/payload"
	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/client"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/authorize"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/heal"
	"github.com/networkservicemesh/sdk/pkg/tools/sandbox"
	"github.com/stretchr/testify/require"
)

// NewNodes builds a sandbox of n nodes (an NSMgr and the SDK's test
// forwarder each, one registry) where the network service is registered:
// a connection from a client of one node to an endpoint of another runs
// through both nodes' NSMgrs and forwarders.
func NewNodes(ctx context.Context, t *testing.T, n int, service string) *sandbox.Domain {
	t.Helper()
	domain := sandbox.NewBuilder(ctx, t).
		SetNodesCount(n).
		SetNSMgrProxySupplier(nil).
		SetRegistryProxySupplier(nil).
		Build()
	_, err := domain.NewNSRegistryClient(ctx, sandbox.GenerateTestToken).Register(ctx,
		&registryapi.NetworkService{Name: service, Payload: payload.Ethernet})
	require.NoError(t, err)
	return domain
}

// HealingClient is a client called name of the NSMgr at nsmgrURL that heals
// with opts, with the elements more.
func HealingClient(ctx context.Context, nsmgrURL *url.URL, name string, opts []heal.Option, more ...networkservice.NetworkServiceClient) networkservice.NetworkServiceClient {
	return client.NewClient(ctx,
		client.WithClientURL(sandbox.CloneURL(nsmgrURL)),
		client.WithName(name),
		client.WithDialOptions(sandbox.DialOptions()...),
		client.WithDialTimeout(5*time.Second),
		client.WithAuthorizeClient(authorize.NewClient(authorize.Any())),
		client.WithHealClient(heal.NewClient(ctx, opts...)),
		client.WithAdditionalFunctionality(more...),
	)
}
