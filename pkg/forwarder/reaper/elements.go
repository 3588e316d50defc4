package reaper

import (
	"context"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/networkservicemesh/sdk/pkg/networkservice/common/begin"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
)

// endpointKey is the server metadata key under which the client element
// keeps the inode of the endpoint's namespace (0: none on this node).
type endpointKey struct{}

type server struct{ r *Reaper }

// NewServer returns the server element of r: it records each connection's
// client end (a kernel mechanism whose namespace recvfd has opened) and
// the endpoint end the client element found; a Close ends the watch of
// the connection, and a Request or a Close spares the connection a sweep's
// Close that has not run yet (see Reaper.track).
func (r *Reaper) NewServer() networkservice.NetworkServiceServer { return server{r: r} }

func (s server) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	conn, err := next.Server(ctx).Request(ctx, request)
	if err != nil {
		return nil, err
	}
	if f := begin.FromContext(ctx); f != nil {
		s.r.track(conn.GetId(), f, ends(ctx, conn))
	}
	return conn, nil
}

func (s server) Close(ctx context.Context, conn *networkservice.Connection) (*emptypb.Empty, error) {
	s.r.closed(conn.GetId(), begin.FromContext(ctx))
	return next.Server(ctx).Close(ctx, conn)
}

// ends are the inodes of the connection's namespaces on this node: its
// client's, when the client is a kernel interface of this node, and its
// endpoint's, when the endpoint is.
func ends(ctx context.Context, conn *networkservice.Connection) []uint64 {
	var out []uint64
	if m := kernelmech.ToMechanism(conn.GetMechanism()); m != nil {
		if ino := Inode(m.GetNetNSURL()); ino != 0 {
			out = append(out, ino)
		}
	}
	if v, ok := metadata.Map(ctx, false).Load(endpointKey{}); ok {
		if ino, _ := v.(uint64); ino != 0 {
			out = append(out, ino)
		}
	}
	return out
}

type client struct{}

// NewClient returns the client element: it records the inode of the
// endpoint's namespace, from the kernel mechanism of the answer once
// recvfd has opened it, for the server element.
func NewClient() networkservice.NetworkServiceClient { return client{} }

func (client) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	conn, err := next.Client(ctx).Request(ctx, request, opts...)
	if err != nil {
		return nil, err
	}
	var ino uint64
	if m := kernelmech.ToMechanism(conn.GetMechanism()); m != nil {
		ino = Inode(m.GetNetNSURL())
	}
	metadata.Map(ctx, false).Store(endpointKey{}, ino)
	return conn, nil
}

func (client) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	return next.Client(ctx).Close(ctx, conn, opts...)
}
