package connlink

import (
	"context"
	"log/slog"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/pkg/proxy"
)

type server struct {
	matcher *Matcher
	logger  *slog.Logger
}

// NewServer returns the element for connections from targets: after a
// successful Request it records the connection's interface in the matcher,
// and on Close it forgets it (announcing the delete if the link was seen),
// unless a later connection with the same key (the target healed through
// another path) recorded it since.
// Place it after the mechanisms element, so that the interface name is set.
func NewServer(matcher *Matcher, opts ...Option) networkservice.NetworkServiceServer {
	return &server{matcher: matcher, logger: newOptions(opts).logger}
}

func (s *server) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	conn, err := next.Server(ctx).Request(ctx, request)
	if err != nil {
		return nil, err
	}
	iface, ierr := interfaceOf(conn, proxy.TargetConn)
	if ierr != nil {
		s.logger.Warn("cannot match the interface of a target connection", "error", ierr)
		return conn, nil
	}
	s.matcher.ExpectConn(conn.GetId(), iface)
	return conn, nil
}

func (s *server) Close(ctx context.Context, conn *networkservice.Connection) (*emptypb.Empty, error) {
	if key, err := proxy.ConnKey(conn, proxy.TargetConn); err == nil {
		s.matcher.ForgetConn(proxy.TargetConn, key, conn.GetId())
	}
	return next.Server(ctx).Close(ctx, conn)
}
