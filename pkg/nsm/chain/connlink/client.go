package connlink

import (
	"context"
	"log/slog"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/pkg/proxy"
)

type client struct {
	matcher *Matcher
	logger  *slog.Logger
}

// NewClient returns the element for connections to load balancers: after a
// successful Request it records the connection's interface in the matcher,
// and on Close it forgets it (announcing the delete if the link was seen),
// before the Close travels on. Place it before the ipcontext element, so
// that a closing connection loses its nexthop before its addresses are
// released.
func NewClient(matcher *Matcher, opts ...Option) networkservice.NetworkServiceClient {
	return &client{matcher: matcher, logger: newOptions(opts).logger}
}

func (c *client) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	conn, err := next.Client(ctx).Request(ctx, request, opts...)
	if err != nil {
		return nil, err
	}
	iface, ierr := interfaceOf(conn, proxy.LBConn)
	if ierr != nil {
		c.logger.Warn("cannot match the interface of a load-balancer connection", "error", ierr)
		return conn, nil
	}
	c.matcher.Expect(iface)
	return conn, nil
}

func (c *client) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	if key, err := proxy.ConnKey(conn, proxy.LBConn); err == nil {
		c.matcher.Forget(proxy.LBConn, key)
	}
	return next.Client(ctx).Close(ctx, conn, opts...)
}
