package findretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/registry/core/next"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Defaults of NewNetworkServiceEndpointRegistryClient.
const (
	DefaultAttempts = 5
	DefaultPause    = 10 * time.Millisecond
	maxPause        = 200 * time.Millisecond
)

// Option configures the element.
type Option func(*client)

// WithAttempts sets how many times a listing Find is run in all (default
// DefaultAttempts).
func WithAttempts(n int) Option { return func(c *client) { c.attempts = max(n, 1) } }

// WithPause sets the pause before the first retry; it doubles for each
// further one, up to 200ms (default DefaultPause).
func WithPause(d time.Duration) Option { return func(c *client) { c.pause = d } }

// WithRetried is called once per retry with the error the answer broke
// with (for a counter or a log line).
func WithRetried(fn func(error)) Option { return func(c *client) { c.retried = fn } }

type client struct {
	attempts int
	pause    time.Duration
	retried  func(error)
}

// NewNetworkServiceEndpointRegistryClient returns the element. Put it in
// front of the registry client chain that discover uses, so that a retry
// goes through the whole chain (dial, recvfd) again.
func NewNetworkServiceEndpointRegistryClient(opts ...Option) registry.NetworkServiceEndpointRegistryClient {
	c := &client{attempts: DefaultAttempts, pause: DefaultPause, retried: func(error) {}}
	for _, o := range opts {
		o(c)
	}
	return c
}

func (c *client) Register(ctx context.Context, nse *registry.NetworkServiceEndpoint, opts ...grpc.CallOption) (*registry.NetworkServiceEndpoint, error) {
	return next.NetworkServiceEndpointRegistryClient(ctx).Register(ctx, nse, opts...)
}

func (c *client) Unregister(ctx context.Context, nse *registry.NetworkServiceEndpoint, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	return next.NetworkServiceEndpointRegistryClient(ctx).Unregister(ctx, nse, opts...)
}

// Find lists (a query that is not a watch) until an answer arrives whole.
// A Find that cannot be opened fails as it did; an answer that broke on
// every attempt fails Find with the last error, so that the caller does
// not take a part for the whole.
func (c *client) Find(ctx context.Context, q *registry.NetworkServiceEndpointQuery, opts ...grpc.CallOption) (registry.NetworkServiceEndpointRegistry_FindClient, error) {
	if q.GetWatch() {
		return next.NetworkServiceEndpointRegistryClient(ctx).Find(ctx, q, opts...)
	}
	pause := c.pause
	for attempt := 1; ; attempt++ {
		stream, err := next.NetworkServiceEndpointRegistryClient(ctx).Find(ctx, proto.Clone(q).(*registry.NetworkServiceEndpointQuery), opts...)
		if err != nil {
			return nil, err
		}
		list, err := readAll(stream)
		if err == nil {
			return &listed{ClientStream: stream, ctx: ctx, list: list}, nil
		}
		if ctx.Err() != nil || attempt >= c.attempts {
			return nil, fmt.Errorf("list endpoints of %v: the answer broke %d times: %w",
				q.GetNetworkServiceEndpoint().GetNetworkServiceNames(), attempt, err)
		}
		c.retried(err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("list endpoints of %v: %w", q.GetNetworkServiceEndpoint().GetNetworkServiceNames(), err)
		case <-time.After(pause):
		}
		pause = min(2*pause, maxPause)
	}
}

// readAll reads an answer to its end (io.EOF, a nil error).
func readAll(stream registry.NetworkServiceEndpointRegistry_FindClient) ([]*registry.NetworkServiceEndpointResponse, error) {
	var list []*registry.NetworkServiceEndpointResponse
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return list, nil
		}
		if err != nil {
			return nil, err
		}
		list = append(list, resp)
	}
}

// listed replays a whole answer. The finished stream it came from answers
// Header and Trailer.
type listed struct {
	grpc.ClientStream
	ctx  context.Context
	list []*registry.NetworkServiceEndpointResponse
}

func (l *listed) Recv() (*registry.NetworkServiceEndpointResponse, error) {
	if len(l.list) == 0 {
		return nil, io.EOF
	}
	resp := l.list[0]
	l.list = l.list[1:]
	return resp, nil
}

// Context is the Find's: the answer stays readable after its stream ended.
func (l *listed) Context() context.Context { return l.ctx }

// RecvMsg serves Recv to callers that read through the generic interface.
func (l *listed) RecvMsg(m any) error {
	resp, err := l.Recv()
	if err != nil {
		return err
	}
	dst, ok := m.(*registry.NetworkServiceEndpointResponse)
	if !ok {
		return fmt.Errorf("findretry: cannot receive into %T", m)
	}
	proto.Reset(dst)
	proto.Merge(dst, resp)
	return nil
}
