package ipcontext

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/pkg/proxy"
)

type client struct {
	setter Setter
	logger *slog.Logger
}

// NewClient returns the NSC-side element for connections to load balancers
// (proxy.LBConn). It calls SetIPContext before passing the request on, so
// that the load balancer receives the addresses in the request, and
// UnsetIPContext on Close. Like the server, it releases the addresses when
// the Request of a connection that was never established fails, and keeps
// them when a refresh or heal of an established connection fails. The chain
// must contain a metadata element before this one.
func NewClient(setter Setter, opts ...Option) networkservice.NetworkServiceClient {
	o := newOptions(opts)
	return &client{setter: setter, logger: o.logger}
}

func (c *client) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	md := metadata.Map(ctx, true)
	_, established := md.Load(establishedKey{})
	conn := request.GetConnection()
	if err := c.setter.SetIPContext(ctx, conn, proxy.LBConn); err != nil {
		if !established {
			c.unset(ctx, conn)
		}
		return nil, fmt.Errorf("set ip context of lb connection %s: %w", conn.GetId(), err)
	}
	resp, err := next.Client(ctx).Request(ctx, request, opts...)
	if err != nil {
		if !established {
			c.unset(ctx, conn)
		}
		return nil, err
	}
	md.Store(establishedKey{}, struct{}{})
	return resp, nil
}

func (c *client) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	c.unset(ctx, conn)
	return next.Client(ctx).Close(ctx, conn, opts...)
}

func (c *client) unset(ctx context.Context, conn *networkservice.Connection) {
	if err := c.setter.UnsetIPContext(ctx, conn, proxy.LBConn); err != nil {
		c.logger.Warn("unset ip context failed", "type", proxy.LBConn.String(), "conn", conn.GetId(), "error", err)
	}
}
