package liveness

import (
	"context"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

type client struct{ nsmgr *NSMgr }

// NewClient returns the chain element that records, after every successful
// Request (first, refresh or heal), the NSMgr run the connection was
// established through, and forgets the connection on Close. Place it in the
// chain of the connections whose heal uses n's HealOptions.
func (n *NSMgr) NewClient() networkservice.NetworkServiceClient { return &client{nsmgr: n} }

func (c *client) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	conn, err := next.Client(ctx).Request(ctx, request, opts...)
	if err != nil {
		return nil, err
	}
	c.nsmgr.ack(ctx, conn)
	return conn, nil
}

func (c *client) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	c.nsmgr.forget(conn.GetId())
	return next.Client(ctx).Close(ctx, conn, opts...)
}
