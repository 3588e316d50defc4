package endpoint

import (
	"context"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/begin"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/trimpath"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/updatepath"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/updatetoken"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"github.com/networkservicemesh/sdk/pkg/tools/grpcutils"
	"google.golang.org/grpc"

	"github.com/causeway-net/causeway/pkg/nsm/sdkreplacement/expiry"
	"github.com/causeway-net/causeway/pkg/nsm/sdkreplacement/monitorconnection"
)

// nseChain is the endpoint's NetworkService chain and its MonitorConnection
// service.
type nseChain struct {
	networkservice.NetworkServiceServer
	monitor networkservice.MonitorConnectionServer
}

// newChain assembles the SDK's endpoint chain (the elements and order of
// its chains/endpoint.NewServer) with monitorconnection in place of the SDK's
// monitor server, which clones every event once per monitor stream (see
// package monitorconnection), and expiry in place of its timeout server, which
// holds a goroutine per connection (see package expiry), followed by
// elements. The MonitorConnection service is monitorconnection's, unchecked (the
// SDK endpoint's monitor authorization with authorize.Any(), which this
// endpoint always used, passes every caller).
func newChain(ctx context.Context, name string, tokens TokenGenerator, auth networkservice.NetworkServiceServer,
	elements []networkservice.NetworkServiceServer) *nseChain {
	mon := monitorconnection.New(ctx)
	return &nseChain{
		NetworkServiceServer: chain.NewNetworkServiceServer(append([]networkservice.NetworkServiceServer{
			updatepath.NewServer(name),
			begin.NewServer(),
			updatetoken.NewServer(tokens),
			auth,
			metadata.NewServer(),
			expiry.NewServer(ctx),
			trimpath.NewServer(),
			mon,
		}, elements...)...),
		monitor: mon,
	}
}

// register serves the chain, the MonitorConnection service and the gRPC
// health service (SERVING for both) on s.
func (c *nseChain) register(s *grpc.Server) {
	grpcutils.RegisterHealthServices(s, c.NetworkServiceServer, c.monitor)
	networkservice.RegisterNetworkServiceServer(s, c.NetworkServiceServer)
	networkservice.RegisterMonitorConnectionServer(s, c.monitor)
}
