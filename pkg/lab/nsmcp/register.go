package nsmcp

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/networkservicemesh/api/pkg/api/registry"
	"google.golang.org/grpc"

	registryclient "github.com/networkservicemesh/sdk/pkg/registry/chains/client"
	registryrecvfd "github.com/networkservicemesh/sdk/pkg/registry/common/recvfd"
	registrysendfd "github.com/networkservicemesh/sdk/pkg/registry/common/sendfd"
)

// registryDialTimeout bounds each dial of the registry clients.
const registryDialTimeout = 5 * time.Second

// Registration is an NSE kept registered (refreshed) with an NSMgr until
// Unregister or until the context given to RegisterEndpoint ends.
type Registration struct {
	client registry.NetworkServiceEndpointRegistryClient
	nse    *registry.NetworkServiceEndpoint
}

// RegisterEndpoint registers nse with the NSMgr at nsmgrURL and keeps the
// registration refreshed while ctx lives. Endpoints reached by file
// descriptor (an NSE in another namespace or process) pass their socket with
// sendfd; the forwarder, local to the NSMgr, registers with recvfd like the
// SDK's own forwarders.
func RegisterEndpoint(ctx context.Context, nsmgrURL *url.URL, dialOpts []grpc.DialOption, nse *registry.NetworkServiceEndpoint) (*Registration, error) {
	return register(ctx, nsmgrURL, dialOpts, nse, registrysendfd.NewNetworkServiceEndpointRegistryClient())
}

func registerForwarder(ctx context.Context, nsmgrURL *url.URL, dialOpts []grpc.DialOption, nse *registry.NetworkServiceEndpoint) (*Registration, error) {
	return register(ctx, nsmgrURL, dialOpts, nse, registryrecvfd.NewNetworkServiceEndpointRegistryClient())
}

func register(ctx context.Context, nsmgrURL *url.URL, dialOpts []grpc.DialOption, nse *registry.NetworkServiceEndpoint, fd registry.NetworkServiceEndpointRegistryClient) (*Registration, error) {
	c := registryclient.NewNetworkServiceEndpointRegistryClient(ctx,
		registryclient.WithClientURL(nsmgrURL),
		registryclient.WithDialOptions(dialOpts...),
		registryclient.WithDialTimeout(registryDialTimeout),
		registryclient.WithNSEAdditionalFunctionality(fd),
	)
	reg, err := c.Register(ctx, nse.Clone())
	if err != nil {
		return nil, fmt.Errorf("register endpoint %s for %v: %w", nse.GetName(), nse.GetNetworkServiceNames(), err)
	}
	return &Registration{client: c, nse: reg}, nil
}

// Endpoint is the endpoint as the registry accepted it.
func (r *Registration) Endpoint() *registry.NetworkServiceEndpoint { return r.nse.Clone() }

// Unregister removes the endpoint from the registry.
func (r *Registration) Unregister(ctx context.Context) error {
	if _, err := r.client.Unregister(ctx, r.nse.Clone()); err != nil {
		return fmt.Errorf("unregister endpoint %s: %w", r.nse.GetName(), err)
	}
	return nil
}

// RegisterService registers the network service ns with the NSMgr at
// nsmgrURL. Requests that name a service nobody registered fail, so an NSE
// registers its service before its endpoint.
func RegisterService(ctx context.Context, nsmgrURL *url.URL, dialOpts []grpc.DialOption, ns *registry.NetworkService) error {
	c := registryclient.NewNetworkServiceRegistryClient(ctx,
		registryclient.WithClientURL(nsmgrURL),
		registryclient.WithDialOptions(dialOpts...),
		registryclient.WithDialTimeout(registryDialTimeout),
	)
	if _, err := c.Register(ctx, ns.Clone()); err != nil {
		return fmt.Errorf("register network service %s: %w", ns.GetName(), err)
	}
	return nil
}
