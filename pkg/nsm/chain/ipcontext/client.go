package ipcontext

import (
	"context"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/pkg/proxy"
)

type client struct{ element }

// NewClient returns the NSC-side element for connections to load balancers
// (proxy.LBConn). It calls SetIPContext before passing the request on, so
// that the load balancer receives the addresses in the request, and
// UnsetIPContext on Close. Like the server, it releases the addresses when
// the Request of a connection that was never established fails, and keeps
// them when a refresh or heal of an established connection fails. The chain
// must contain a metadata element before this one.
func NewClient(setter Setter, opts ...Option) networkservice.NetworkServiceClient {
	o := newOptions(opts)
	return &client{element{setter: setter, typ: proxy.LBConn, logger: o.logger}}
}

func (c *client) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	return c.request(ctx, metadata.Map(ctx, true), request.GetConnection(), func() (*networkservice.Connection, error) {
		return next.Client(ctx).Request(ctx, request, opts...)
	})
}

func (c *client) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	c.unset(ctx, conn)
	return next.Client(ctx).Close(ctx, conn, opts...)
}
