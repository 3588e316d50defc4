package mtu

import (
	"context"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"google.golang.org/protobuf/types/known/emptypb"
)

type server struct{ mtu uint32 }

// NewServer returns an element that sets the configured MTU on every
// Request before passing it on.
func NewServer(opts ...Option) networkservice.NetworkServiceServer {
	return &server{mtu: newOptions(opts).mtu}
}

func (s *server) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	set(request.GetConnection(), s.mtu)
	return next.Server(ctx).Request(ctx, request)
}

func (s *server) Close(ctx context.Context, conn *networkservice.Connection) (*emptypb.Empty, error) {
	return next.Server(ctx).Close(ctx, conn)
}
