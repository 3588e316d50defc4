package ipcontext

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/pkg/proxy"
)

type server struct {
	setter Setter
	logger *slog.Logger
}

// NewServer returns the NSE-side element for connections from targets
// (proxy.TargetConn). It calls SetIPContext before passing the request on,
// and UnsetIPContext on Close. When the Request of a connection that was
// never established fails (in the Setter or further down the chain), the
// addresses are released again so that they do not leak. A failed refresh
// keeps them: the connection still exists and its owner will retry or close.
// The chain must contain a metadata element before this one.
func NewServer(setter Setter, opts ...Option) networkservice.NetworkServiceServer {
	o := newOptions(opts)
	return &server{setter: setter, logger: o.logger}
}

func (s *server) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	md := metadata.Map(ctx, false)
	_, established := md.Load(establishedKey{})
	conn := request.GetConnection()
	if err := s.setter.SetIPContext(ctx, conn, proxy.TargetConn); err != nil {
		if !established {
			s.unset(ctx, conn)
		}
		return nil, fmt.Errorf("set ip context of target connection %s: %w", conn.GetId(), err)
	}
	resp, err := next.Server(ctx).Request(ctx, request)
	if err != nil {
		if !established {
			s.unset(ctx, conn)
		}
		return nil, err
	}
	md.Store(establishedKey{}, struct{}{})
	return resp, nil
}

func (s *server) Close(ctx context.Context, conn *networkservice.Connection) (*emptypb.Empty, error) {
	s.unset(ctx, conn)
	return next.Server(ctx).Close(ctx, conn)
}

func (s *server) unset(ctx context.Context, conn *networkservice.Connection) {
	if err := s.setter.UnsetIPContext(ctx, conn, proxy.TargetConn); err != nil {
		s.logger.Warn("unset ip context failed", "type", proxy.TargetConn.String(), "conn", conn.GetId(), "error", err)
	}
}
