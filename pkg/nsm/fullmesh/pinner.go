package fullmesh

import (
	"context"
	"sync"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Pinner is a client chain element that keeps each full-mesh connection on
// its endpoint: a heal with reselect clears NetworkServiceEndpointName, and
// the Pinner puts it back for the ids the mesh has pinned. The mesh unpins
// an id once its connection is closed, so the table only holds live ids.
type Pinner struct {
	mu   sync.Mutex
	pins map[string]string // connection id → endpoint name
}

// NewPinner returns an empty Pinner.
func NewPinner() *Pinner {
	return &Pinner{pins: make(map[string]string)}
}

func (p *Pinner) pin(id, nse string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pins[id] = nse
}

func (p *Pinner) unpin(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pins, id)
}

// Pinned returns the endpoint an id is pinned to.
func (p *Pinner) Pinned(id string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	nse, ok := p.pins[id]
	return nse, ok
}

// Request restores the pinned endpoint name.
func (p *Pinner) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	if conn := request.GetConnection(); conn != nil {
		if nse, ok := p.Pinned(conn.GetId()); ok {
			conn.NetworkServiceEndpointName = nse
		}
	}
	return next.Client(ctx).Request(ctx, request, opts...)
}

// Close passes the Close on.
func (p *Pinner) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	return next.Client(ctx).Close(ctx, conn, opts...)
}
