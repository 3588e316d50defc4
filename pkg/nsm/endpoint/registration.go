package endpoint

import (
	"context"
	"maps"
	"time"

	"github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/registry/core/next"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// NodeNameLabel is the label that ties targets to the proxy of their node.
const NodeNameLabel = "nodeName"

// networkService is the registration of the service: a target is routed to
// the endpoint whose nodeName label equals its own nodeName label, unless
// nodeMatch is false.
func networkService(name, payload string, nodeMatch bool) *registry.NetworkService {
	if !nodeMatch {
		return &registry.NetworkService{Name: name, Payload: payload}
	}
	return &registry.NetworkService{
		Name:    name,
		Payload: payload,
		Matches: []*registry.Match{{
			SourceSelector: map[string]string{NodeNameLabel: "{{." + NodeNameLabel + "}}"},
			Routes: []*registry.Destination{{
				DestinationSelector: map[string]string{NodeNameLabel: "{{." + NodeNameLabel + "}}"},
			}},
		}},
	}
}

func networkServiceEndpoint(cfg *Config, url string) *registry.NetworkServiceEndpoint {
	nse := &registry.NetworkServiceEndpoint{
		Name:                cfg.Name,
		NetworkServiceNames: []string{cfg.Service},
		Url:                 url,
	}
	labels := maps.Clone(cfg.Labels)
	if cfg.NodeName != "" {
		if labels == nil {
			labels = map[string]string{}
		}
		labels[NodeNameLabel] = cfg.NodeName
	}
	if labels != nil {
		nse.NetworkServiceLabels = map[string]*registry.NetworkServiceLabels{cfg.Service: {Labels: labels}}
	}
	return nse
}

// lifetimeClient sets the requested expiration on every Register, including
// the registry client's refreshes, which replay the original request.
type lifetimeClient struct {
	lifetime time.Duration
}

func (c *lifetimeClient) Register(ctx context.Context, nse *registry.NetworkServiceEndpoint, opts ...grpc.CallOption) (*registry.NetworkServiceEndpoint, error) {
	nse.ExpirationTime = timestamppb.New(time.Now().Add(c.lifetime))
	return next.NetworkServiceEndpointRegistryClient(ctx).Register(ctx, nse, opts...)
}

func (c *lifetimeClient) Find(ctx context.Context, q *registry.NetworkServiceEndpointQuery, opts ...grpc.CallOption) (registry.NetworkServiceEndpointRegistry_FindClient, error) {
	return next.NetworkServiceEndpointRegistryClient(ctx).Find(ctx, q, opts...)
}

func (c *lifetimeClient) Unregister(ctx context.Context, nse *registry.NetworkServiceEndpoint, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	return next.NetworkServiceEndpointRegistryClient(ctx).Unregister(ctx, nse, opts...)
}
