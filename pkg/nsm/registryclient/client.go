package registryclient

import (
	"context"
	"net/url"

	"github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/registry/common/begin"
	"github.com/networkservicemesh/sdk/pkg/registry/common/clientconn"
	"github.com/networkservicemesh/sdk/pkg/registry/common/clienturl"
	"github.com/networkservicemesh/sdk/pkg/registry/common/connect"
	"github.com/networkservicemesh/sdk/pkg/registry/common/dial"
	"github.com/networkservicemesh/sdk/pkg/registry/common/grpcmetadata"
	"github.com/networkservicemesh/sdk/pkg/registry/common/refresh"
	"github.com/networkservicemesh/sdk/pkg/registry/common/retry"
	"github.com/networkservicemesh/sdk/pkg/registry/core/chain"
	"github.com/networkservicemesh/sdk/pkg/registry/utils/metadata"
)

// NewNSEClient returns the network service endpoint registry client toward
// the NSMgr at u. ctx bounds its refresh and dial goroutines.
func NewNSEClient(ctx context.Context, u *url.URL, opts ...Option) registry.NetworkServiceEndpointRegistryClient {
	o := newOptions(opts)
	elements := []registry.NetworkServiceEndpointRegistryClient{
		begin.NewNetworkServiceEndpointRegistryClient(),
		metadata.NewNetworkServiceEndpointClient(),
	}
	if o.retry {
		elements = append(elements, retry.NewNetworkServiceEndpointRegistryClient(ctx))
	}
	elements = append(elements,
		refresh.NewNetworkServiceEndpointRegistryClient(ctx),
		clienturl.NewNetworkServiceEndpointRegistryClient(u),
		clientconn.NewNetworkServiceEndpointRegistryClient(),
		grpcmetadata.NewNetworkServiceEndpointRegistryClient(),
		dial.NewNetworkServiceEndpointRegistryClient(ctx, dial.WithDialTimeout(o.dialTimeout), dial.WithDialOptions(o.dialOptions...)))
	elements = append(elements, o.extra...)
	return chain.NewNetworkServiceEndpointRegistryClient(append(elements, connect.NewNetworkServiceEndpointRegistryClient())...)
}

// NewNSClient returns the network service registry client toward the
// NSMgr at u. ctx bounds its dial goroutines.
func NewNSClient(ctx context.Context, u *url.URL, opts ...Option) registry.NetworkServiceRegistryClient {
	o := newOptions(opts)
	elements := []registry.NetworkServiceRegistryClient{
		begin.NewNetworkServiceRegistryClient(),
		metadata.NewNetworkServiceClient(),
	}
	if o.retry {
		elements = append(elements, retry.NewNetworkServiceRegistryClient(ctx))
	}
	return chain.NewNetworkServiceRegistryClient(append(elements,
		clienturl.NewNetworkServiceRegistryClient(u),
		clientconn.NewNetworkServiceRegistryClient(),
		grpcmetadata.NewNetworkServiceRegistryClient(),
		dial.NewNetworkServiceRegistryClient(ctx, dial.WithDialTimeout(o.dialTimeout), dial.WithDialOptions(o.dialOptions...)),
		connect.NewNetworkServiceRegistryClient())...)
}
