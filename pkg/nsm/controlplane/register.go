package controlplane

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/networkservicemesh/api/pkg/api/registry"
	"google.golang.org/grpc"

	registryrecvfd "github.com/networkservicemesh/sdk/pkg/registry/common/recvfd"
	registrysendfd "github.com/networkservicemesh/sdk/pkg/registry/common/sendfd"

	"github.com/causeway-net/causeway/pkg/nsm/registration"
)

// registryDialTimeout bounds each dial of the registry clients.
const registryDialTimeout = 5 * time.Second

// Each try of a registration (first or refresh) gets registerTryTimeout,
// ended by cancellation (see registration.WithTryTimeout); registerTimeout
// bounds the retries of the first one. Refreshes are retried for as long
// as the registration lives, so a restarted NSMgr is filled again.
const (
	registerTryTimeout = 2 * time.Second
	registerTimeout    = 10 * time.Second
)

// Registration is an NSE kept registered (refreshed, retried) with an NSMgr
// until Unregister or until the context given to RegisterEndpoint ends.
type Registration struct {
	keeper *registration.Keeper
	stop   func() bool
}

// RegisterEndpoint registers nse with the NSMgr at nsmgrURL and keeps the
// registration refreshed while ctx lives; when ctx ends the refreshes stop
// without unregistering (as when the process dies). Endpoints reached by
// file descriptor (an NSE in another namespace or process) pass their
// socket with sendfd; the forwarder, local to the NSMgr, registers with
// recvfd like the SDK's own forwarders.
func RegisterEndpoint(ctx context.Context, nsmgrURL *url.URL, dialOpts []grpc.DialOption, nse *registry.NetworkServiceEndpoint) (*Registration, error) {
	return register(ctx, nsmgrURL, dialOpts, nil, nse, registrysendfd.NewNetworkServiceEndpointRegistryClient())
}

func registerForwarder(ctx context.Context, nsmgrURL *url.URL, dialOpts []grpc.DialOption, nse *registry.NetworkServiceEndpoint) (*Registration, error) {
	return register(ctx, nsmgrURL, dialOpts, nil, nse, registryrecvfd.NewNetworkServiceEndpointRegistryClient())
}

func register(ctx context.Context, nsmgrURL *url.URL, dialOpts []grpc.DialOption, ns *registry.NetworkService, nse *registry.NetworkServiceEndpoint,
	fd registry.NetworkServiceEndpointRegistryClient) (*Registration, error) {
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	reg := registration.Clients(life, nsmgrURL, dialOpts, registryDialTimeout, fd)
	k, err := registration.Start(ctx, reg, ns, nse,
		registration.WithFirstTimeout(registerTimeout), registration.WithTryTimeout(registerTryTimeout))
	if err != nil {
		cancel()
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() {
		k.Abandon()
		cancel()
	})
	return &Registration{keeper: k, stop: func() bool {
		ok := stop()
		cancel()
		return ok
	}}, nil
}

// Endpoint is the endpoint as the registry accepted it.
func (r *Registration) Endpoint() *registry.NetworkServiceEndpoint { return r.keeper.Endpoint() }

// Unregister removes the endpoint from the registry and stops refreshing it.
func (r *Registration) Unregister(ctx context.Context) error {
	defer r.stop()
	return r.keeper.Stop(ctx)
}

// RegisterService registers the network service ns with the NSMgr at
// nsmgrURL once. Requests that name a service nobody registered fail, so an
// NSE registers its service before its endpoint.
func RegisterService(ctx context.Context, nsmgrURL *url.URL, dialOpts []grpc.DialOption, ns *registry.NetworkService) error {
	reg := registration.Clients(ctx, nsmgrURL, dialOpts, registryDialTimeout)
	regCtx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	if _, err := reg.Service.Register(regCtx, ns.Clone()); err != nil {
		return fmt.Errorf("register network service %s: %w", ns.GetName(), err)
	}
	return nil
}
