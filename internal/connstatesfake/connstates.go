// Package connstatesfake is the project's one fake of an NSMgr's
// MonitorConnection service (the client the heal check and the full
// mesh's recovery ask about the state of a connection): it answers with
// the connections it holds whose first path segment is the one asked
// about, or fails as an NSMgr that is away. It imports only NSM's API and
// grpc.
package connstatesfake

import (
	"context"
	"errors"
	"sync"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"google.golang.org/grpc"
)

// ErrAway is the error of a question to an NSMgr that is away.
var ErrAway = errors.New("connection refused")

// ConnStates is a fake MonitorConnection client. Safe for concurrent use.
type ConnStates struct {
	mu    sync.Mutex
	away  bool
	conns []*networkservice.Connection
	asked []string
}

var _ networkservice.MonitorConnectionClient = (*ConnStates)(nil)

// New returns a fake that holds conns, as the NSMgr's side of them: the
// first path segment is the asker's, the second the NSMgr's.
func New(conns ...*networkservice.Connection) *ConnStates {
	return &ConnStates{conns: conns}
}

// Set replaces the connections held.
func (f *ConnStates) Set(conns ...*networkservice.Connection) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conns = conns
}

// SetAway makes every question fail with ErrAway, or answer again.
func (f *ConnStates) SetAway(away bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.away = away
}

// Asked lists the path segment ids asked about, in order.
func (f *ConnStates) Asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

// MonitorConnections answers, in one initial state transfer, the held
// connections whose first path segment has the selector's first id, keyed
// by their NSMgr-side id.
func (f *ConnStates) MonitorConnections(_ context.Context, sel *networkservice.MonitorScopeSelector, _ ...grpc.CallOption) (networkservice.MonitorConnection_MonitorConnectionsClient, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := sel.GetPathSegments()[0].GetId()
	f.asked = append(f.asked, id)
	if f.away {
		return nil, ErrAway
	}
	ev := &networkservice.ConnectionEvent{Type: networkservice.ConnectionEventType_INITIAL_STATE_TRANSFER,
		Connections: map[string]*networkservice.Connection{}}
	for _, c := range f.conns {
		if segs := c.GetPath().GetPathSegments(); len(segs) > 1 && segs[0].GetId() == id {
			ev.Connections[segs[1].GetId()] = c.Clone()
		}
	}
	return &stream{ev: ev}, nil
}

// stream is the answer of one question: the one event, as often as asked.
type stream struct {
	grpc.ClientStream
	ev *networkservice.ConnectionEvent
}

func (s *stream) Recv() (*networkservice.ConnectionEvent, error) { return s.ev, nil }
