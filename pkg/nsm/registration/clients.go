package registration

import (
	"context"
	"net/url"
	"time"

	"github.com/networkservicemesh/api/pkg/api/registry"
	"google.golang.org/grpc"

	registryclient "github.com/networkservicemesh/sdk/pkg/registry/chains/client"
	registrynull "github.com/networkservicemesh/sdk/pkg/registry/common/null"
)

// Clients builds the SDK's registry clients to the NSMgr at nsmgrURL
// without the SDK's retry and heal elements: the Keeper retries. extra
// elements (sendfd or recvfd, a lifetime setter) go at the end of the
// endpoint client's chain. ctx bounds the clients' dial goroutines.
func Clients(ctx context.Context, nsmgrURL *url.URL, dialOpts []grpc.DialOption, dialTimeout time.Duration,
	extra ...registry.NetworkServiceEndpointRegistryClient) Registrar {
	common := []registryclient.Option{
		registryclient.WithClientURL(nsmgrURL),
		registryclient.WithDialOptions(dialOpts...),
	}
	if dialTimeout > 0 {
		common = append(common, registryclient.WithDialTimeout(dialTimeout))
	}
	ns := registryclient.NewNetworkServiceRegistryClient(ctx, append(common,
		registryclient.WithNSRetryClient(registrynull.NewNetworkServiceRegistryClient()),
		registryclient.WithNSHealClient(registrynull.NewNetworkServiceRegistryClient()))...)
	nse := registryclient.NewNetworkServiceEndpointRegistryClient(ctx, append(common,
		registryclient.WithNSERetryClient(registrynull.NewNetworkServiceEndpointRegistryClient()),
		registryclient.WithNSEHealClient(registrynull.NewNetworkServiceEndpointRegistryClient()),
		registryclient.WithNSEAdditionalFunctionality(extra...))...)
	return Registrar{Service: ns, Endpoint: nse}
}
