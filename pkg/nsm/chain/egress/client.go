package egress

import (
	"context"
	"sync"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// ReportFunc receives the egress state. It is called when the state changes
// (the first connection is established, the last one is closed), under the
// element's lock, so calls arrive in order.
type ReportFunc func(serving bool)

type client struct {
	report ReportFunc

	mu    sync.Mutex
	conns map[string]struct{}
}

// NewClient returns an element that adds the connection id to its set after
// a successful Request and removes it on Close, reporting serving while the
// set is not empty.
func NewClient(report ReportFunc) networkservice.NetworkServiceClient {
	return &client{report: report, conns: make(map[string]struct{})}
}

func (c *client) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	conn, err := next.Client(ctx).Request(ctx, request, opts...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.conns[conn.GetId()]; !ok {
		c.conns[conn.GetId()] = struct{}{}
		if len(c.conns) == 1 {
			c.report(true)
		}
	}
	return conn, nil
}

func (c *client) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	c.mu.Lock()
	if _, ok := c.conns[conn.GetId()]; ok {
		delete(c.conns, conn.GetId())
		if len(c.conns) == 0 {
			c.report(false)
		}
	}
	c.mu.Unlock()
	return next.Client(ctx).Close(ctx, conn, opts...)
}
