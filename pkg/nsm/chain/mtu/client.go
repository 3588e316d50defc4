package mtu

import (
	"context"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

type client struct{ mtu uint32 }

// NewClient returns an element that sets the configured MTU on every
// Request before passing it on.
func NewClient(opts ...Option) networkservice.NetworkServiceClient {
	return &client{mtu: newOptions(opts).mtu}
}

func (c *client) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	set(request.GetConnection(), c.mtu)
	return next.Client(ctx).Request(ctx, request, opts...)
}

func (c *client) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	return next.Client(ctx).Close(ctx, conn, opts...)
}
