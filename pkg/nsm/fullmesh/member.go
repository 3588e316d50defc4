package fullmesh

import (
	"context"
	"sync"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/networkservicemesh/api/pkg/api/networkservice/payload"
)

// member owns the connection to one endpoint: it requests until it
// succeeds or is stopped, then holds the connection until stopped, then
// closes it.
type member struct {
	nse     string
	id      string
	expires time.Time // zero: no expiry known; touched by the mesh loop only
	// lifetime is how long the registration ran when it was last listed
	// (its expiry less the time it was seen; zero when unknown): a live
	// endpoint refreshes within it. Mesh loop only.
	lifetime time.Duration
	// unlisted is when a listing after a reconnect of the watch first
	// missed the endpoint (zero while it is listed); mesh loop only.
	unlisted time.Time

	stop chan struct{}
	done chan struct{}
	// leave, set before stop is closed, makes the member leave its
	// connection established instead of closing it (WithLeaveOnStop).
	leave bool

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
			// A member added after this one waits for this one's done
			// only: it must not come before prev's Close is over, or
			// that Close would take down its connection (same id).
			<-prev
			return
		}
	}
	if f.opts.pinner != nil {
		f.opts.pinner.pin(m.id, m.nse)
		defer f.opts.pinner.unpin(m.id)
	}
	log := f.opts.logger.With("nse", m.nse, "conn", m.id)
	var recovered *networkservice.Connection
	if f.opts.recovery != nil {
		recovered = f.recover(base, m)
		if recovered != nil {
			log.Info("resuming the connection of a previous run on its data path")
		}
	}
	for try := 0; ; try++ {
		if m.stopped() {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(base), f.opts.requestTimeout)
		req := f.newRequest(m)
		switch {
		case recovered != nil && try == 0:
			req.Connection = resume(recovered, req.GetConnection())
		case recovered != nil:
			req.Connection = reselect(recovered, req.GetConnection())
		}
		conn, err := f.client.Request(ctx, req)
		cancel()
		if err == nil {
			m.mu.Lock()
			m.conn = conn
			m.mu.Unlock()
			log.Info("connected to load balancer")
			break
		}
		if recovered != nil && try == 0 {
			log.Warn("the previous run's connection could not be resumed; reselecting", "error", err)
			continue
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
	if m.leave {
		log.Info("load-balancer connection left established for the next run")
		return
	}
	if f.opts.withdraw != nil {
		f.opts.withdraw(m.connection())
	}
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
		Payload:                    payload.Ethernet, // the proxy bridges its interfaces
		Labels:                     make(map[string]string, len(f.opts.labels)),
	}
	for k, v := range f.opts.labels {
		conn.Labels[k] = v
	}
	return &networkservice.NetworkServiceRequest{Connection: conn}
}

// recover returns the connection with the member's id that the NSMgr still
// has from a previous run of the proxy (the NSMgr's view: path index 1,
// segment 0 ours), or nil.
func (f *FullMesh) recover(base context.Context, m *member) *networkservice.Connection {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(base), f.opts.requestTimeout)
	defer cancel()
	stream, err := f.opts.recovery.MonitorConnections(ctx, &networkservice.MonitorScopeSelector{
		PathSegments: []*networkservice.PathSegment{{Id: m.id}},
	})
	if err != nil {
		f.opts.logger.Warn("connection monitor unavailable, no recovery", "conn", m.id, "error", err)
		return nil
	}
	ev, err := stream.Recv()
	if err != nil {
		f.opts.logger.Warn("connection monitor failed, no recovery", "conn", m.id, "error", err)
		return nil
	}
	for _, conn := range ev.GetConnections() {
		segs := conn.GetPath().GetPathSegments()
		if conn.GetPath().GetIndex() == 1 && len(segs) > 1 && segs[0].GetId() == m.id {
			return conn.Clone()
		}
	}
	return nil
}

// resume turns a recovered connection into a refresh of its data path:
// its whole path (so that the NSMgr and the forwarder know it as theirs)
// and its mechanism (the same interface). The mechanism's namespace is
// named again as a file of this process, for the fd to be passed anew (the
// inode URL recovered was passed by the previous run).
func resume(old, fresh *networkservice.Connection) *networkservice.Connection {
	conn := ours(old, fresh)
	conn.State = networkservice.State_UP
	if k := kernelmech.ToMechanism(conn.GetMechanism()); k != nil {
		k.SetNetNSURL(ownNetNS)
	}
	return conn
}

// ownNetNS names the process's network namespace as the SDK's kernel
// mechanism client does.
const ownNetNS = "file:///proc/thread-self/ns/net"

// reselect turns a recovered connection into a request for a new data
// path to the same endpoint: no mechanism, the reselect state.
func reselect(old, fresh *networkservice.Connection) *networkservice.Connection {
	conn := ours(old, fresh)
	conn.Mechanism = nil
	conn.State = networkservice.State_RESELECT_REQUESTED
	return conn
}

// ours is a copy of a recovered connection seen from our end (our path
// segment first) with the identity and labels of a fresh request.
func ours(old, fresh *networkservice.Connection) *networkservice.Connection {
	conn := old.Clone()
	conn.Id = fresh.GetId()
	conn.NetworkService = fresh.GetNetworkService()
	conn.NetworkServiceEndpointName = fresh.GetNetworkServiceEndpointName()
	conn.Payload = fresh.GetPayload()
	conn.Labels = fresh.GetLabels()
	if conn.GetPath() != nil {
		conn.GetPath().Index = 0
	}
	return conn
}

// setExpiry records a listing of the member's registration, seen at now.
func (m *member) setExpiry(expires, now time.Time) {
	m.expires = expires
	m.lifetime = 0
	if expires.After(now) {
		m.lifetime = expires.Sub(now)
	}
}
