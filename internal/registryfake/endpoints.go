package registryfake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var _ registryapi.NetworkServiceEndpointRegistryClient = (*Registry)(nil)

// watchBuffer bounds the events a watch holds for its reader; a test
// registers far fewer.
const watchBuffer = 1000

// Register stores the endpoint (with the granted expiration, see
// WithExpiry) and tells the watchers.
func (r *Registry) Register(ctx context.Context, nse *registryapi.NetworkServiceEndpoint, _ ...grpc.CallOption) (*registryapi.NetworkServiceEndpoint, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts.EndpointRegisters++
	if _, ok := ctx.Deadline(); ok && r.refuseDeadlines {
		return nil, errors.New("a registration must not carry a deadline")
	}
	if r.down {
		return nil, ErrDown
	}
	for _, s := range nse.GetNetworkServiceNames() {
		if r.requireServices && !r.services[s] {
			return nil, fmt.Errorf("unknown network service %s", s)
		}
	}
	nse = nse.Clone()
	if r.expiry > 0 {
		nse.ExpirationTime = timestamppb.New(time.Now().Add(r.expiry))
	}
	r.nses[nse.GetName()] = nse
	r.broadcast(&registryapi.NetworkServiceEndpointResponse{NetworkServiceEndpoint: nse.Clone()})
	return nse.Clone(), nil
}

// Unregister removes the endpoint and tells the watchers.
func (r *Registry) Unregister(_ context.Context, nse *registryapi.NetworkServiceEndpoint, _ ...grpc.CallOption) (*emptypb.Empty, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts.Unregisters++
	if nse == nil {
		// The SDK's registry client chain dereferences it (sendfd).
		return nil, errors.New("unregister of no endpoint")
	}
	if r.down {
		return nil, ErrDown
	}
	if held, ok := r.nses[nse.GetName()]; ok {
		delete(r.nses, nse.GetName())
		r.broadcast(&registryapi.NetworkServiceEndpointResponse{NetworkServiceEndpoint: held, Deleted: true})
	}
	return &emptypb.Empty{}, nil
}

// Find streams every endpoint, sorted by name, whatever the query asks;
// with a watch the stream then goes on with the changes until ctx ends or
// the registry goes down.
func (r *Registry) Find(ctx context.Context, q *registryapi.NetworkServiceEndpointQuery, _ ...grpc.CallOption) (registryapi.NetworkServiceEndpointRegistry_FindClient, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return nil, ErrDown
	}
	s := &stream{ctx: ctx, events: make(chan *registryapi.NetworkServiceEndpointResponse, watchBuffer), broken: make(chan struct{})}
	for _, name := range slices.Sorted(maps.Keys(r.nses)) {
		s.events <- &registryapi.NetworkServiceEndpointResponse{NetworkServiceEndpoint: r.nses[name].Clone()}
	}
	if q.GetWatch() {
		r.counts.Watches++
		r.watchers = append(r.watchers, s)
	} else {
		close(s.events)
	}
	return s, nil
}

// broadcast gives ev to every open watch. r.mu must be held.
func (r *Registry) broadcast(ev *registryapi.NetworkServiceEndpointResponse) {
	for _, w := range r.watchers {
		select {
		case <-w.broken:
		default:
			w.events <- ev
		}
	}
}

// stream is the answer of one Find.
type stream struct {
	grpc.ClientStream
	ctx    context.Context
	events chan *registryapi.NetworkServiceEndpointResponse
	broken chan struct{}
	once   sync.Once
}

func (s *stream) Recv() (*registryapi.NetworkServiceEndpointResponse, error) {
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

func (s *stream) breakStream() { s.once.Do(func() { close(s.broken) }) }
