package ipcontext

import (
	"context"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/pkg/proxy"
)

type server struct{ element }

// NewServer returns the NSE-side element for connections from targets
// (proxy.TargetConn). It calls SetIPContext before passing the request on,
// and UnsetIPContext on Close. When the Request of a connection that was
// never established fails (in the Setter or further down the chain), the
// addresses are released again so that they do not leak. A failed refresh
// keeps them: the connection still exists and its owner will retry or close.
// The chain must contain a metadata element before this one.
func NewServer(setter Setter, opts ...Option) networkservice.NetworkServiceServer {
	o := newOptions(opts)
	return &server{element{setter: setter, typ: proxy.TargetConn, logger: o.logger}}
}

func (s *server) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	return s.request(ctx, metadata.Map(ctx, false), request.GetConnection(), func() (*networkservice.Connection, error) {
		return next.Server(ctx).Request(ctx, request)
	})
}

func (s *server) Close(ctx context.Context, conn *networkservice.Connection) (*emptypb.Empty, error) {
	s.unset(ctx, conn)
	return next.Server(ctx).Close(ctx, conn)
}
