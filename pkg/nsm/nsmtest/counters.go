package nsmtest

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Served is an endpoint's element that counts the Requests it serves
// (first, refresh and heal). The zero value is ready.
type Served struct{ n atomic.Int32 }

func (s *Served) Request(ctx context.Context, r *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	s.n.Add(1)
	return next.Server(ctx).Request(ctx, r)
}

func (s *Served) Close(ctx context.Context, conn *networkservice.Connection) (*emptypb.Empty, error) {
	return next.Server(ctx).Close(ctx, conn)
}

// Count is how many Requests it has served.
func (s *Served) Count() int { return int(s.n.Load()) }

// Closes is a client's element that counts the Closes passing through it,
// by connection id: a heal that reselects closes the connection (its data
// path) first. The zero value is ready.
type Closes struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *Closes) Request(ctx context.Context, r *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	return next.Client(ctx).Request(ctx, r, opts...)
}

func (c *Closes) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[conn.GetId()]++
	c.mu.Unlock()
	return next.Client(ctx).Close(ctx, conn, opts...)
}

// Of is how many Closes of connection id passed.
func (c *Closes) Of(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}
