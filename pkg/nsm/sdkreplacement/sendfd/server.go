package sendfd

import (
	"context"

	"github.com/edwarnicke/grpcfd"
	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/tools/postpone"
)

type server struct{}

// NewServer returns the element; it belongs last in an endpoint's chain,
// where the SDK's sendfd server would be.
func NewServer() networkservice.NetworkServiceServer { return server{} }

// Request sends the answer's namespace file. When it cannot, the
// connection that the rest of the chain set up is closed again and the
// error returned: the client sees a failure and nothing is left behind.
func (server) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	closeCtx := postpone.ContextWithValues(ctx)
	conn, err := next.Server(ctx).Request(ctx, request)
	if err != nil {
		return nil, err
	}
	sender, ok := grpcfd.FromContext(ctx)
	if !ok {
		return conn, nil
	}
	if err := sendFile(sender, conn.GetMechanism().GetParameters()); err != nil {
		cctx, cancel := closeCtx()
		defer cancel()
		_, _ = next.Server(ctx).Close(cctx, conn)
		return nil, err
	}
	return conn, nil
}

// Close closes the rest of the chain, then sends the namespace file, as
// the client's recvfd element expects it on the answer.
func (server) Close(ctx context.Context, conn *networkservice.Connection) (*empty.Empty, error) {
	if _, err := next.Server(ctx).Close(ctx, conn); err != nil {
		return nil, err
	}
	sender, ok := grpcfd.FromContext(ctx)
	if !ok {
		return &empty.Empty{}, nil
	}
	if err := sendFile(sender, conn.GetMechanism().GetParameters()); err != nil {
		return nil, err
	}
	return &empty.Empty{}, nil
}
