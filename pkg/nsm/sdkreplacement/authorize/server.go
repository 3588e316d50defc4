package authorize

import (
	"context"
	"fmt"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

type server struct {
	checker
}

// NewServer returns the endpoint's element: a Request or Close from a gRPC
// peer passes on only if the path up to our segment passes the server
// policies (see the package doc). Calls without a gRPC peer (in process)
// are not checked.
func NewServer(opts ...Option) networkservice.NetworkServiceServer {
	return &server{newChecker(serverPolicies, opts)}
}

func (s *server) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	if err := s.checkLeft(ctx, "request", request.GetConnection()); err != nil {
		return nil, err
	}
	return next.Server(ctx).Request(ctx, request)
}

func (s *server) Close(ctx context.Context, conn *networkservice.Connection) (*emptypb.Empty, error) {
	if err := s.checkLeft(ctx, "close", conn); err != nil {
		return nil, err
	}
	return next.Server(ctx).Close(ctx, conn)
}

// checkLeft checks the segments up to and including ours.
func (s *server) checkLeft(ctx context.Context, op string, conn *networkservice.Connection) error {
	p, ok := peer.FromContext(ctx)
	if !ok || len(s.policies) == 0 {
		return nil
	}
	segments := conn.GetPath().GetPathSegments()
	index := conn.GetPath().GetIndex()
	if uint64(index) >= uint64(len(segments)) {
		err := fmt.Errorf("path index %d beyond its %d segments", index, len(segments))
		s.opts.log.WarnContext(ctx, "NSM authorization refused", "op", op, "connection", conn.GetId(), "reason", err.Error())
		return status.Errorf(codes.PermissionDenied, "authorization: %v", err)
	}
	return s.check(ctx, op, conn, segments[:index+1], int(index), p)
}
