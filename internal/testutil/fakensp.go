package testutil

import (
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
)

// FakeNSP is a scripted configuration server (nsp.v1 ConfigurationManager)
// for tests. An open watch sends each response the test puts on VIPs or
// Conduits (one watch takes each; the channels are unbuffered, so a send
// returns once a watch has it); a nil response ends that watch with
// codes.Unavailable, as a restarting server would.
type FakeNSP struct {
	nspv1.UnimplementedConfigurationManagerServer
	VIPs     chan *nspv1.VipResponse
	Conduits chan *nspv1.ConduitResponse
	// VIPWatches and ConduitWatches receive the filter of each watch as
	// it opens, failed ones included, while they have room (64 each).
	VIPWatches     chan *nspv1.Vip
	ConduitWatches chan *nspv1.Conduit

	mu        sync.Mutex
	calls     int
	failFirst int
}

// NewFakeNSP returns a fake whose first failFirst watches fail at once with
// codes.Unavailable.
func NewFakeNSP(failFirst int) *FakeNSP {
	return &FakeNSP{
		VIPs: make(chan *nspv1.VipResponse), Conduits: make(chan *nspv1.ConduitResponse),
		VIPWatches: make(chan *nspv1.Vip, 64), ConduitWatches: make(chan *nspv1.Conduit, 64),
		failFirst: failFirst,
	}
}

// ServeFakeNSP serves a new FakeNSP (see NewFakeNSP) on addr (empty: a free
// loopback port) until the end of the test.
func ServeFakeNSP(t testing.TB, addr string, failFirst int) (*FakeNSP, *GRPCServer) {
	t.Helper()
	f := NewFakeNSP(failFirst)
	return f, ServeGRPC(t, addr, func(s *grpc.Server) { nspv1.RegisterConfigurationManagerServer(s, f) })
}

// Calls counts the watches opened so far, failed ones included.
func (f *FakeNSP) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// ConduitList is a WatchConduit response with the conduits names of trench.
func ConduitList(trench string, names ...string) *nspv1.ConduitResponse {
	r := &nspv1.ConduitResponse{}
	for _, n := range names {
		r.Conduits = append(r.Conduits, &nspv1.Conduit{Name: n, Trench: &nspv1.Trench{Name: trench}})
	}
	return r
}

// WatchVip implements nsp.v1.
func (f *FakeNSP) WatchVip(filter *nspv1.Vip, stream grpc.ServerStreamingServer[nspv1.VipResponse]) error {
	return watch(f, filter, f.VIPWatches, f.VIPs, stream)
}

// WatchConduit implements nsp.v1.
func (f *FakeNSP) WatchConduit(filter *nspv1.Conduit, stream grpc.ServerStreamingServer[nspv1.ConduitResponse]) error {
	return watch(f, filter, f.ConduitWatches, f.Conduits, stream)
}

func (f *FakeNSP) opened() (fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.calls <= f.failFirst
}

func watch[F, R any](f *FakeNSP, filter *F, filters chan<- *F, responses <-chan *R, stream grpc.ServerStreamingServer[R]) error {
	select {
	case filters <- filter:
	default:
	}
	if f.opened() {
		return status.Error(codes.Unavailable, "fake NSP: not ready")
	}
	for {
		select {
		case r := <-responses:
			if r == nil {
				return status.Error(codes.Unavailable, "fake NSP: restarting")
			}
			if err := stream.Send(r); err != nil {
				return err
			}
		case <-stream.Context().Done():
			return nil
		}
	}
}
