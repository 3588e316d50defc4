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
	registryretry "github.com/networkservicemesh/sdk/pkg/registry/common/retry"
	registrysendfd "github.com/networkservicemesh/sdk/pkg/registry/common/sendfd"
)

// registryDialTimeout bounds each dial of the registry clients.
const registryDialTimeout = 5 * time.Second

// The registry's expire element schedules an endpoint's expiry at its
// expiration minus the Register call's remaining deadline, so a Register
// must never carry a deadline as long as the expiration: the endpoint would
// be unregistered at once. Each try of a Register (first or refresh) gets
// registerTryTimeout (the SDK default of 15s would forbid expirations under
// 15s); registerTimeout bounds the retries of the first one.
const (
	registerTryTimeout = 2 * time.Second
	registerTimeout    = 10 * time.Second
)

// Registration is an NSE kept registered (refreshed) with an NSMgr until
// Unregister or until the context given to RegisterEndpoint ends.
type Registration struct {
	client registry.NetworkServiceEndpointRegistryClient
	nse    *registry.NetworkServiceEndpoint
	cancel context.CancelFunc
	stop   func() bool
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
	// The refreshes run on a context without ctx's deadline (see
	// registerTimeout) that still ends with ctx.
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	c := registryclient.NewNetworkServiceEndpointRegistryClient(life,
		registryclient.WithClientURL(nsmgrURL),
		registryclient.WithDialOptions(dialOpts...),
		registryclient.WithDialTimeout(registryDialTimeout),
		registryclient.WithNSEAdditionalFunctionality(fd),
		registryclient.WithNSERetryClient(registryretry.NewNetworkServiceEndpointRegistryClient(life,
			registryretry.WithTryTimeout(registerTryTimeout))),
	)
	regCtx, regCancel := context.WithTimeout(life, registerTimeout)
	defer regCancel()
	reg, err := c.Register(regCtx, nse.Clone())
	if err != nil {
		stop()
		cancel()
		return nil, fmt.Errorf("register endpoint %s for %v: %w", nse.GetName(), nse.GetNetworkServiceNames(), err)
	}
	return &Registration{client: c, nse: reg, cancel: cancel, stop: stop}, nil
}

// Endpoint is the endpoint as the registry accepted it.
func (r *Registration) Endpoint() *registry.NetworkServiceEndpoint { return r.nse.Clone() }

// Unregister removes the endpoint from the registry and stops refreshing it.
func (r *Registration) Unregister(ctx context.Context) error {
	defer func() {
		r.stop()
		r.cancel()
	}()
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
	regCtx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	if _, err := c.Register(regCtx, ns.Clone()); err != nil {
		return fmt.Errorf("register network service %s: %w", ns.GetName(), err)
	}
	return nil
}
