package fullmesh_test

import (
	"context"
	"errors"
	"io"
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

// fakeStream is a Find stream fed by the fake registry.
type fakeStream struct {
	grpc.ClientStream
	ctx    context.Context
	events chan *registryapi.NetworkServiceEndpointResponse
	broken chan struct{}
	once   sync.Once
}

func (s *fakeStream) Recv() (*registryapi.NetworkServiceEndpointResponse, error) {
	select {
	case ev, ok := <-s.events:
		if !ok {
			return nil, io.EOF
		}
		return ev, nil
	case <-s.broken:
		return nil, errors.New("stream broken")
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

func (s *fakeStream) breakStream() { s.once.Do(func() { close(s.broken) }) }

// fakeRegistry is an in-memory NSE registry whose watches can be broken and
// whose deletes can be lost.
type fakeRegistry struct {
	mu       sync.Mutex
	nses     map[string]*registryapi.NetworkServiceEndpoint
	watchers []*fakeStream
	down     bool
	watches  int
}

func newFakeRegistry() *fakeRegistry {
	return &fakeRegistry{nses: make(map[string]*registryapi.NetworkServiceEndpoint)}
}

func (r *fakeRegistry) Register(_ context.Context, nse *registryapi.NetworkServiceEndpoint, _ ...grpc.CallOption) (*registryapi.NetworkServiceEndpoint, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nses[nse.GetName()] = nse.Clone()
	r.broadcast(&registryapi.NetworkServiceEndpointResponse{NetworkServiceEndpoint: nse.Clone()})
	return nse, nil
}

func (r *fakeRegistry) Unregister(_ context.Context, nse *registryapi.NetworkServiceEndpoint, _ ...grpc.CallOption) (*emptypb.Empty, error) {
	r.remove(nse.GetName(), true)
	return &emptypb.Empty{}, nil
}

// remove deletes an endpoint, telling the watchers only if notify.
func (r *fakeRegistry) remove(name string, notify bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	nse, ok := r.nses[name]
	if !ok {
		return
	}
	delete(r.nses, name)
	if notify {
		r.broadcast(&registryapi.NetworkServiceEndpointResponse{NetworkServiceEndpoint: nse, Deleted: true})
	}
}

func (r *fakeRegistry) broadcast(ev *registryapi.NetworkServiceEndpointResponse) {
	for _, w := range r.watchers {
		select {
		case <-w.broken:
		default:
			w.events <- ev
		}
	}
}

// setDown breaks every open watch and makes Find fail while down.
func (r *fakeRegistry) setDown(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
	if down {
		for _, w := range r.watchers {
			w.breakStream()
		}
		r.watchers = nil
	}
}

func (r *fakeRegistry) watchCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.watches
}

func (r *fakeRegistry) Find(ctx context.Context, q *registryapi.NetworkServiceEndpointQuery, _ ...grpc.CallOption) (registryapi.NetworkServiceEndpointRegistry_FindClient, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return nil, errors.New("registry unavailable")
	}
	s := &fakeStream{ctx: ctx, events: make(chan *registryapi.NetworkServiceEndpointResponse, 1000), broken: make(chan struct{})}
	for _, name := range slices.Sorted(maps.Keys(r.nses)) {
		s.events <- &registryapi.NetworkServiceEndpointResponse{NetworkServiceEndpoint: r.nses[name].Clone()}
	}
	if q.GetWatch() {
		r.watches++
		r.watchers = append(r.watchers, s)
	} else {
		close(s.events)
	}
	return s, nil
}

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
