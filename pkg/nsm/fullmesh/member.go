package fullmesh

import (
	"context"
	"sync"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
)

// member owns the connection to one endpoint: it requests until it
// succeeds or is stopped, then holds the connection until stopped, then
// closes it.
type member struct {
	nse     string
	id      string
	expires time.Time // zero: no expiry known; touched by the mesh loop only

	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	conn *networkservice.Connection
}

func (m *member) connection() *networkservice.Connection {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.conn
}

func (m *member) stopped() bool {
	select {
	case <-m.stop:
		return true
	default:
		return false
	}
}

// run is the member's goroutine. prev, if not nil, is closed when an earlier
// member with the same id has finished closing.
func (f *FullMesh) runMember(base context.Context, m *member, prev <-chan struct{}) {
	defer close(m.done)
	if prev != nil {
		select {
		case <-prev:
		case <-m.stop:
			return
		}
	}
	if f.opts.pinner != nil {
		f.opts.pinner.pin(m.id, m.nse)
		defer f.opts.pinner.unpin(m.id)
	}
	log := f.opts.logger.With("nse", m.nse, "conn", m.id)
	for {
		if m.stopped() {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(base), f.opts.requestTimeout)
		conn, err := f.client.Request(ctx, f.newRequest(m))
		cancel()
		if err == nil {
			m.mu.Lock()
			m.conn = conn
			m.mu.Unlock()
			log.Info("connected to load balancer")
			break
		}
		log.Warn("request to load balancer failed", "error", err)
		t := time.NewTimer(f.opts.retryInterval)
		select {
		case <-t.C:
		case <-m.stop:
			t.Stop()
			return
		}
	}
	<-m.stop
	ctx, cancel := context.WithTimeout(context.WithoutCancel(base), f.opts.closeTimeout)
	defer cancel()
	if _, err := f.client.Close(ctx, m.connection()); err != nil {
		log.Warn("close of load-balancer connection failed", "error", err)
	} else {
		log.Info("closed load-balancer connection")
	}
}

func (f *FullMesh) newRequest(m *member) *networkservice.NetworkServiceRequest {
	conn := &networkservice.Connection{
		Id:                         m.id,
		NetworkService:             f.service,
		NetworkServiceEndpointName: m.nse,
		Payload:                    f.opts.payload,
		Labels:                     make(map[string]string, len(f.opts.labels)),
	}
	for k, v := range f.opts.labels {
		conn.Labels[k] = v
	}
	req := &networkservice.NetworkServiceRequest{Connection: conn}
	for _, mech := range f.opts.mechanisms {
		req.MechanismPreferences = append(req.MechanismPreferences, mech.Clone())
	}
	return req
}
