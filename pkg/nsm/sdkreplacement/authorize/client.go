package authorize

import (
	"context"
	"errors"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"github.com/networkservicemesh/sdk/pkg/tools/postpone"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/emptypb"
)

type client struct {
	checker
}

// NewClient returns the client's element: the connection a Request returns
// is accepted only if its whole path passes the client policies against
// the server's TLS certificate (see the package doc). A refused first
// Request closes the connection it made; a refused refresh leaves the
// connection as it was. It needs the SDK's metadata element before it in
// the chain (client.NewClient has it).
func NewClient(opts ...Option) networkservice.NetworkServiceClient {
	return &client{newChecker(clientPolicies, opts)}
}

// authorized marks, in a connection's metadata, that a Request of it passed.
type authorized struct{}

func (c *client) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	if len(c.policies) == 0 {
		return next.Client(ctx).Request(ctx, request, opts...)
	}
	var p peer.Peer
	closeCtx := postpone.ContextWithValues(ctx)
	conn, err := next.Client(ctx).Request(ctx, request, append(opts, grpc.Peer(&p))...)
	if err != nil {
		return nil, err
	}
	path := conn.GetPath()
	err = c.check(ctx, "request", conn, path.GetPathSegments(), int(path.GetIndex()), &p)
	if err == nil {
		metadata.Map(ctx, true).Store(authorized{}, struct{}{})
		return conn, nil
	}
	if _, refresh := metadata.Map(ctx, true).Load(authorized{}); !refresh {
		cctx, cancel := closeCtx()
		defer cancel()
		if _, closeErr := next.Client(ctx).Close(cctx, conn, opts...); closeErr != nil {
			err = errors.Join(err, closeErr)
		}
	}
	return nil, err
}

func (c *client) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	if len(c.policies) > 0 {
		metadata.Map(ctx, true).Delete(authorized{})
	}
	return next.Client(ctx).Close(ctx, conn, opts...)
}
