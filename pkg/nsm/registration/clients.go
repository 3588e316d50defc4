package registration

import (
	"context"
	"net/url"
	"time"

	"github.com/networkservicemesh/api/pkg/api/registry"
	"google.golang.org/grpc"

	"github.com/causeway-net/causeway/pkg/nsm/registryclient"
)

// Clients builds the registry clients to the NSMgr at nsmgrURL without
// retry or heal elements: the Keeper retries. extra elements (sendfd or
// recvfd, a lifetime setter) go at the end of the endpoint client's chain.
// ctx bounds the clients' dial goroutines.
func Clients(ctx context.Context, nsmgrURL *url.URL, dialOpts []grpc.DialOption, dialTimeout time.Duration,
	extra ...registry.NetworkServiceEndpointRegistryClient) Registrar {
	opts := []registryclient.Option{registryclient.WithDialOptions(dialOpts...), registryclient.WithDialTimeout(dialTimeout)}
	return Registrar{
		Service:  registryclient.NewNSClient(ctx, nsmgrURL, opts...),
		Endpoint: registryclient.NewNSEClient(ctx, nsmgrURL, append(opts, registryclient.WithEndpointElements(extra...))...),
	}
}
