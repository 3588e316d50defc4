package nsmtest

import (
	"context"
	"sync"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Conns is an endpoint's own element (a load balancer's, say) that keeps
// the connections it serves, as its Request returned them, until their
// Close. The zero value is ready.
type Conns struct {
	mu    sync.Mutex
	conns map[string]*networkservice.Connection
}

func (c *Conns) Request(ctx context.Context, r *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	conn, err := next.Server(ctx).Request(ctx, r)
	if err == nil {
		c.mu.Lock()
		if c.conns == nil {
			c.conns = map[string]*networkservice.Connection{}
		}
		c.conns[conn.GetId()] = conn.Clone()
		c.mu.Unlock()
	}
	return conn, err
}

func (c *Conns) Close(ctx context.Context, conn *networkservice.Connection) (*emptypb.Empty, error) {
	c.mu.Lock()
	delete(c.conns, conn.GetId())
	c.mu.Unlock()
	return next.Server(ctx).Close(ctx, conn)
}

// Open returns copies of the open connections.
func (c *Conns) Open() []*networkservice.Connection {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*networkservice.Connection, 0, len(c.conns))
	for _, conn := range c.conns {
		out = append(out, conn.Clone())
	}
	return out
}

// Count is how many connections are open.
func (c *Conns) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}
