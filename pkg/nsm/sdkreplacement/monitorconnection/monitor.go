package monitorconnection

import (
	"context"
	"sync"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Monitor is the chain element and the MonitorConnection service. The
// connections it holds and sends are its own clones, never changed once
// stored: several streams may marshal the same one at once.
type Monitor struct {
	chainCtx context.Context

	mu    sync.Mutex
	conns held
	subs  streams
}

// New returns a Monitor whose streams end when chainCtx (the endpoint's
// life) ends, or their own context does.
func New(chainCtx context.Context) *Monitor {
	return &Monitor{
		chainCtx: chainCtx,
		conns:    held{conns: map[string]*networkservice.Connection{}, bySeg: index[string]{}},
		subs:     streams{byKey: index[*subscriber]{}},
	}
}

var (
	_ networkservice.NetworkServiceServer    = (*Monitor)(nil)
	_ networkservice.MonitorConnectionServer = (*Monitor)(nil)
)

// Request passes the request on and publishes the connection it returns as
// an UPDATE.
func (m *Monitor) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	conn, err := next.Server(ctx).Request(ctx, request)
	if err != nil {
		return nil, err
	}
	m.publish(networkservice.ConnectionEventType_UPDATE, conn)
	return conn, nil
}

// Close passes the close on and publishes a DELETE of the connection, also
// when a later element failed (the connection is gone for the NSMgr).
func (m *Monitor) Close(ctx context.Context, conn *networkservice.Connection) (*emptypb.Empty, error) {
	rv, err := next.Server(ctx).Close(ctx, conn)
	m.publish(networkservice.ConnectionEventType_DELETE, conn)
	return rv, err
}

// MonitorConnections sends the connections the selector matches (initial
// state transfer), then each later event about one of them, until the
// stream or the endpoint ends.
func (m *Monitor) MonitorConnections(selector *networkservice.MonitorScopeSelector, srv networkservice.MonitorConnection_MonitorConnectionsServer) error {
	s := &subscriber{selector: selector, ready: make(chan struct{}, 1)}
	m.mu.Lock()
	s.push(&networkservice.ConnectionEvent{
		Type:        networkservice.ConnectionEventType_INITIAL_STATE_TRANSFER,
		Connections: m.conns.matching(selector),
	})
	m.subs.add(s)
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.subs.remove(s)
		m.mu.Unlock()
	}()
	for {
		select {
		case <-srv.Context().Done():
			return nil
		case <-m.chainCtx.Done():
			return nil
		case <-s.ready:
		}
		for _, ev := range s.take() {
			if err := srv.Send(ev); err != nil {
				return err
			}
		}
	}
}

// publish records the event and queues it for every stream that watches
// the connection, found through the streams' keys (see keyOf): the cost
// of an event does not grow with the number of streams. It never waits
// for a stream.
func (m *Monitor) publish(typ networkservice.ConnectionEventType, conn *networkservice.Connection) {
	if conn == nil {
		return
	}
	c := conn.Clone()
	id := c.GetId()
	m.mu.Lock()
	defer m.mu.Unlock()
	if typ == networkservice.ConnectionEventType_DELETE {
		m.conns.drop(id)
	} else {
		m.conns.put(c)
	}
	var ev *networkservice.ConnectionEvent
	m.subs.watching(c, func(s *subscriber) {
		if ev == nil {
			ev = &networkservice.ConnectionEvent{Type: typ, Connections: map[string]*networkservice.Connection{id: c}}
		}
		s.push(ev)
	})
}

// subscriber is one open MonitorConnections stream: the events queued for
// it, in publication order, and a wake-up for its handler.
type subscriber struct {
	selector *networkservice.MonitorScopeSelector
	mu       sync.Mutex
	queue    []*networkservice.ConnectionEvent
	ready    chan struct{} // capacity 1: set when queue became non-empty
}

func (s *subscriber) push(ev *networkservice.ConnectionEvent) {
	s.mu.Lock()
	s.queue = append(s.queue, ev)
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func (s *subscriber) take() []*networkservice.ConnectionEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue = nil
	return q
}
