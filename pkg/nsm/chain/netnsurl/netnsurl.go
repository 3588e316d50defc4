package netnsurl

import (
	"context"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"google.golang.org/grpc"

	"github.com/networkservicemesh/sdk/pkg/networkservice/common/null"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
)

// fileURL is the kernel mechanism's URL of the namespace bound at path.
func fileURL(path string) string { return "file://" + path }

func pointAt(m *networkservice.Mechanism, url string) {
	if km := kernelmech.ToMechanism(m); km != nil {
		km.SetNetNSURL(url)
	}
}

type client struct{ url string }

// NewClient returns a client element that points the kernel mechanism
// preferences and the connection's kernel mechanism at the namespace
// bind-mounted at path. An empty path gives a no-op element.
func NewClient(path string) networkservice.NetworkServiceClient {
	if path == "" {
		return null.NewClient()
	}
	return &client{url: fileURL(path)}
}

func (c *client) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	for _, m := range request.GetMechanismPreferences() {
		pointAt(m, c.url)
	}
	pointAt(request.GetConnection().GetMechanism(), c.url)
	return next.Client(ctx).Request(ctx, request, opts...)
}

func (c *client) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*empty.Empty, error) {
	pointAt(conn.GetMechanism(), c.url)
	return next.Client(ctx).Close(ctx, conn, opts...)
}

type server struct{ url string }

// NewServer returns a server element that points the connection's kernel
// mechanism at the namespace bind-mounted at path. An empty path gives a
// no-op element.
func NewServer(path string) networkservice.NetworkServiceServer {
	if path == "" {
		return null.NewServer()
	}
	return &server{url: fileURL(path)}
}

func (s *server) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	pointAt(request.GetConnection().GetMechanism(), s.url)
	return next.Server(ctx).Request(ctx, request)
}

func (s *server) Close(ctx context.Context, conn *networkservice.Connection) (*empty.Empty, error) {
	pointAt(conn.GetMechanism(), s.url)
	return next.Server(ctx).Close(ctx, conn)
}
