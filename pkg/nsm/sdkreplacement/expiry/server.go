package expiry

import (
	"context"
	"errors"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/begin"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/internal/clock"
)

// server is the chain element. It keeps a connection's wait in the
// connection's metadata (the chain's begin serializes a connection's
// Requests and Closes, so no lock is needed around it).
type server struct {
	chainCtx context.Context
	clock    clock.Clock
}

// NewServer returns the element. Its waits end with chainCtx (the
// endpoint's life): once it is done, no expiry closes a connection. It must
// follow begin and metadata in the chain.
func NewServer(chainCtx context.Context, opts ...Option) networkservice.NetworkServiceServer {
	return &server{chainCtx: chainCtx, clock: newOptions(opts).clock}
}

// metadataKey is the key of a connection's *wait in its metadata.
type metadataKey struct{}

// Request passes the request on and, once it succeeded, (re-)arms the
// connection's wait for the expiry of its previous path segment.
func (s *server) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	// What the caller gives the Request to complete: it refreshes that
	// long before the expiry at the latest, so the wait leaves it out.
	var requestTimeout time.Duration
	if deadline, ok := ctx.Deadline(); ok {
		requestTimeout = time.Until(deadline)
	}
	conn, err := next.Server(ctx).Request(ctx, request)
	if err != nil {
		return nil, err
	}
	expires := conn.GetPrevPathSegment().GetExpires()
	if expires == nil {
		return nil, status.Errorf(codes.InvalidArgument, "connection %s: its previous path segment has no expiry", conn.GetId())
	}
	s.stop(ctx)
	wait := expires.AsTime().Sub(s.clock.Now()) - requestTimeout
	metadata.Map(ctx, false).Store(metadataKey{}, s.arm(begin.FromContext(ctx), wait))
	return conn, nil
}

// Close passes the close on and cancels the connection's wait, unless the
// close failed on a deadline or a cancellation: the connection may then
// still be up further down, and its expiry closes it.
func (s *server) Close(ctx context.Context, conn *networkservice.Connection) (*emptypb.Empty, error) {
	_, err := next.Server(ctx).Close(ctx, conn)
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		s.stop(ctx)
	}
	return &emptypb.Empty{}, err
}

// stop cancels the connection's wait, if it has one.
func (s *server) stop(ctx context.Context) {
	if w, ok := metadata.Map(ctx, false).LoadAndDelete(metadataKey{}); ok {
		w.(*wait).cancel()
	}
}
