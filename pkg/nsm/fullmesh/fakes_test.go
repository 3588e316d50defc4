package fullmesh_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func lb(name string, expires time.Time) *registryapi.NetworkServiceEndpoint {
	nse := &registryapi.NetworkServiceEndpoint{Name: name, NetworkServiceNames: []string{"lb"}}
	if !expires.IsZero() {
		nse.ExpirationTime = timestamppb.New(expires)
	}
	return nse
}

// fakeClient is an NSC that records connections.
type fakeClient struct {
	mu       sync.Mutex
	open     map[string]*networkservice.Connection
	requests []*networkservice.NetworkServiceRequest
	closes   []string
	failures int            // fail that many Requests first
	gate     chan struct{}  // if not nil, Requests wait for it
	slowShut chan struct{}  // if not nil, Closes wait for it
	closing  map[string]int // Closes in flight, by id
	overlaps []string       // ids requested while a Close of theirs was in flight
}

func newFakeClient() *fakeClient {
	return &fakeClient{open: make(map[string]*networkservice.Connection)}
}

func (c *fakeClient) Request(_ context.Context, r *networkservice.NetworkServiceRequest, _ ...grpc.CallOption) (*networkservice.Connection, error) {
	c.mu.Lock()
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		<-gate
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing[r.GetConnection().GetId()] > 0 {
		c.overlaps = append(c.overlaps, r.GetConnection().GetId())
	}
	c.requests = append(c.requests, r)
	if c.failures > 0 {
		c.failures--
		return nil, errors.New("no route to nse")
	}
	conn := r.GetConnection().Clone()
	c.open[conn.GetId()] = conn
	return conn, nil
}

func (c *fakeClient) Close(_ context.Context, conn *networkservice.Connection, _ ...grpc.CallOption) (*emptypb.Empty, error) {
	c.mu.Lock()
	slow := c.slowShut
	if c.closing == nil {
		c.closing = map[string]int{}
	}
	c.closing[conn.GetId()]++
	c.mu.Unlock()
	if slow != nil {
		<-slow
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closing[conn.GetId()]--
	c.closes = append(c.closes, conn.GetId())
	delete(c.open, conn.GetId())
	return &emptypb.Empty{}, nil
}

func (c *fakeClient) openIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.open))
}

func (c *fakeClient) closeCount(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, x := range c.closes {
		if x == id {
			n++
		}
	}
	return n
}

func (c *fakeClient) requestCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.requests)
}

func (c *fakeClient) closingCount(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing[id]
}

func (c *fakeClient) overlapping() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.overlaps)
}
