package nsmcp

import (
	"context"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"google.golang.org/grpc"

	"github.com/networkservicemesh/sdk/pkg/networkservice/common/null"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
)

// The SDK's kernel mechanism elements name the namespace of the calling
// thread. A process started inside its namespace (ip netns exec) needs
// nothing more; a component run in-process for another namespace (tests, or
// a lab process serving several namespaces) points its kernel mechanisms at
// that namespace with these elements, placed right after the kernel
// mechanism element and before sendfd.

func netnsFileURL(path string) string { return "file://" + path }

func pointAt(m *networkservice.Mechanism, url string) {
	if km := kernelmech.ToMechanism(m); km != nil {
		km.SetNetNSURL(url)
	}
}

type netnsClient struct{ url string }

// NetNSClient returns a client element that points the kernel mechanism
// preferences and the connection's kernel mechanism at the namespace
// bind-mounted at path. An empty path gives a no-op element.
func NetNSClient(path string) networkservice.NetworkServiceClient {
	if path == "" {
		return null.NewClient()
	}
	return &netnsClient{url: netnsFileURL(path)}
}

func (c *netnsClient) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	for _, m := range request.GetMechanismPreferences() {
		pointAt(m, c.url)
	}
	pointAt(request.GetConnection().GetMechanism(), c.url)
	return next.Client(ctx).Request(ctx, request, opts...)
}

func (c *netnsClient) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*empty.Empty, error) {
	pointAt(conn.GetMechanism(), c.url)
	return next.Client(ctx).Close(ctx, conn, opts...)
}

type netnsServer struct{ url string }

// NetNSServer returns a server element that points the connection's kernel
// mechanism at the namespace bind-mounted at path. An empty path gives a
// no-op element.
func NetNSServer(path string) networkservice.NetworkServiceServer {
	if path == "" {
		return null.NewServer()
	}
	return &netnsServer{url: netnsFileURL(path)}
}

func (s *netnsServer) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	pointAt(request.GetConnection().GetMechanism(), s.url)
	return next.Server(ctx).Request(ctx, request)
}

func (s *netnsServer) Close(ctx context.Context, conn *networkservice.Connection) (*empty.Empty, error) {
	pointAt(conn.GetMechanism(), s.url)
	return next.Server(ctx).Close(ctx, conn)
}
