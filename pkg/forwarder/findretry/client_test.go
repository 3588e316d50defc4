package findretry_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/registry/core/next"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-net/causeway/pkg/forwarder/findretry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// errSend is what the registry's sendfd server answers when grpcfd reports
// its own second close of the file as the send's error.
var errSend = status.Error(codes.Unknown, "failed to send a file /proc/1/fd/50, the file probably doesn't exist: close /proc/1/fd/50: file already closed")

// registryTail is the rest of the chain: a registry of names whose answers
// break (after `sent` endpoints) while broken() says so.
type registryTail struct {
	registry.NetworkServiceEndpointRegistryClient // Register, Unregister unused
	names                                         []string
	sent                                          int
	broken                                        func() bool
	finds                                         atomic.Int32
}

func (r *registryTail) Find(ctx context.Context, q *registry.NetworkServiceEndpointQuery, _ ...grpc.CallOption) (registry.NetworkServiceEndpointRegistry_FindClient, error) {
	r.finds.Add(1)
	s := &stream{ctx: ctx, watch: q.GetWatch()}
	broken := r.broken()
	for i, n := range r.names {
		if broken && i == r.sent {
			s.err = errSend
			break
		}
		s.resps = append(s.resps, &registry.NetworkServiceEndpointResponse{NetworkServiceEndpoint: &registry.NetworkServiceEndpoint{Name: n}})
	}
	return s, nil
}

type stream struct {
	grpc.ClientStream
	ctx   context.Context
	watch bool
	resps []*registry.NetworkServiceEndpointResponse
	err   error
}

func (s *stream) Recv() (*registry.NetworkServiceEndpointResponse, error) {
	if len(s.resps) > 0 {
		r := s.resps[0]
		s.resps = s.resps[1:]
		return r, nil
	}
	if s.err != nil {
		return nil, s.err
	}
	if s.watch {
		<-s.ctx.Done()
		return nil, s.ctx.Err()
	}
	return nil, io.EOF
}

func (s *stream) Context() context.Context { return s.ctx }

func list(ctx context.Context, c registry.NetworkServiceEndpointRegistryClient) ([]string, error) {
	s, err := c.Find(ctx, &registry.NetworkServiceEndpointQuery{NetworkServiceEndpoint: &registry.NetworkServiceEndpoint{NetworkServiceNames: []string{"svc"}}})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, nse := range registry.ReadNetworkServiceEndpointList(s) {
		names = append(names, nse.GetName())
	}
	return names, nil
}

// An answer that broke is listed again; the caller gets the whole list,
// never the part before the break (what discover would have taken for
// "no candidates").
func TestListsAgainWhenTheAnswerBroke(t *testing.T) {
	for _, sent := range []int{0, 1} { // broke before the first endpoint, after one
		var breaks atomic.Int32
		breaks.Store(2)
		tail := &registryTail{names: []string{"proxy-a", "proxy-b"}, sent: sent, broken: func() bool { return breaks.Add(-1) >= 0 }}
		var retried []error
		c := next.NewNetworkServiceEndpointRegistryClient(
			findretry.NewNetworkServiceEndpointRegistryClient(findretry.WithPause(0), findretry.WithRetried(func(err error) { retried = append(retried, err) })),
			tail)
		names, err := list(context.Background(), c)
		require.NoError(t, err)
		require.Equal(t, []string{"proxy-a", "proxy-b"}, names, "broken after %d", sent)
		require.EqualValues(t, 3, tail.finds.Load())
		require.Len(t, retried, 2)
		require.ErrorIs(t, retried[0], errSend)
	}
}

// An answer that breaks on every attempt fails the Find with its error.
func TestFailsWhenEveryAnswerBroke(t *testing.T) {
	tail := &registryTail{names: []string{"proxy-a"}, broken: func() bool { return true }}
	c := next.NewNetworkServiceEndpointRegistryClient(
		findretry.NewNetworkServiceEndpointRegistryClient(findretry.WithPause(0), findretry.WithAttempts(3)), tail)
	_, err := list(context.Background(), c)
	require.ErrorIs(t, err, errSend)
	require.EqualValues(t, 3, tail.finds.Load())

	// A caller that gave up ends the retries.
	tail.finds.Store(0)
	ctx, cancel := context.WithCancel(context.Background())
	c = next.NewNetworkServiceEndpointRegistryClient(
		findretry.NewNetworkServiceEndpointRegistryClient(findretry.WithPause(time.Hour), findretry.WithRetried(func(error) { cancel() })), tail)
	_, err = list(ctx, c)
	require.ErrorIs(t, err, errSend)
	require.EqualValues(t, 1, tail.finds.Load())
}

// A whole answer, an empty one included, is handed on as it came, and a
// watch passes through untouched (its owner reconnects).
func TestPassesWholeAnswersAndWatches(t *testing.T) {
	tail := &registryTail{broken: func() bool { return false }}
	c := next.NewNetworkServiceEndpointRegistryClient(findretry.NewNetworkServiceEndpointRegistryClient(), tail)
	names, err := list(context.Background(), c)
	require.NoError(t, err)
	require.Empty(t, names)
	require.EqualValues(t, 1, tail.finds.Load())

	ctx, cancel := context.WithCancel(context.Background())
	tail.names = []string{"proxy-a"}
	s, err := c.Find(ctx, &registry.NetworkServiceEndpointQuery{Watch: true, NetworkServiceEndpoint: &registry.NetworkServiceEndpoint{}})
	require.NoError(t, err)
	resp, err := s.Recv()
	require.NoError(t, err)
	require.Equal(t, "proxy-a", resp.GetNetworkServiceEndpoint().GetName())
	cancel()
	_, err = s.Recv()
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.Is(err, io.EOF))
}
