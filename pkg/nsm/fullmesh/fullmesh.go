package fullmesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	registryapi "github.com/networkservicemesh/api/pkg/api/registry"

	"github.com/causeway-net/causeway/internal/backoff"
)

// ConnectionID is the deterministic id of the connection from the proxy
// called name to endpoint nse of service.
func ConnectionID(name, service, nse string) string {
	return name + "-" + service + "-" + nse
}

// FullMesh keeps one connection per registered endpoint of a service.
type FullMesh struct {
	name     string
	service  string
	client   networkservice.NetworkServiceClient
	registry registryapi.NetworkServiceEndpointRegistryClient
	opts     *options

	mu      sync.Mutex
	members map[string]*member // by endpoint name; written by the Run loop only

	closing map[string]chan struct{} // endpoint name → done of a member being closed
	wg      sync.WaitGroup
}

// New returns a full mesh for proxy name toward every endpoint of service,
// requesting through client (an NSM client chain to the NSMgr, with refresh
// and heal, without retry: the mesh retries) and watching endpoints through
// registry (an NSE registry client to the NSMgr).
func New(name, service string, client networkservice.NetworkServiceClient, registry registryapi.NetworkServiceEndpointRegistryClient, opts ...Option) *FullMesh {
	return &FullMesh{
		name:     name,
		service:  service,
		client:   client,
		registry: registry,
		opts:     newOptions(opts),
		members:  make(map[string]*member),
		closing:  make(map[string]chan struct{}),
	}
}

// Connections returns copies of the established connections, by endpoint
// name.
func (f *FullMesh) Connections() map[string]*networkservice.Connection {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]*networkservice.Connection, len(f.members))
	for nse, m := range f.members {
		if c := m.connection(); c != nil {
			out[nse] = c.Clone()
		}
	}
	return out
}

// message is what the watch goroutine hands to the Run loop.
type message struct {
	resync []string                                    // a full listing (non-nil on resync)
	event  *registryapi.NetworkServiceEndpointResponse // a watch event
}

// Listed reports whether the endpoint nse is a member that the registry
// lists now: its registration was seen, and no listing since the watch last
// reconnected has missed it. A member kept only while it may register again
// (see resync) is not listed.
func (f *FullMesh) Listed(nse string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.members[nse]
	return ok && m.unlisted.IsZero()
}

// Run keeps the mesh until ctx is done, then closes every connection (in
// parallel, each bounded by the close timeout; with WithLeaveOnStop only
// those whose endpoint went away) and returns nil once all are closed. It
// owns every goroutine it starts.
func (f *FullMesh) Run(ctx context.Context) error {
	msgs := make(chan message)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		f.watchLoop(watchCtx, msgs)
	}()

	ticker := time.NewTicker(f.opts.expiryInterval)
	defer ticker.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case msg := <-msgs:
			if msg.resync != nil {
				f.resync(msg.resync)
			} else {
				f.handle(ctx, msg.event)
			}
		case <-ticker.C:
			f.evictExpired()
			f.pruneClosing()
		}
	}
	stopWatch()
	<-watchDone

	f.mu.Lock()
	for nse, m := range f.members {
		m.leave = f.opts.leaveOnStop
		close(m.stop)
		delete(f.members, nse)
	}
	f.mu.Unlock()
	f.wg.Wait()
	f.closing = make(map[string]chan struct{})
	return nil
}

func (f *FullMesh) handle(ctx context.Context, ev *registryapi.NetworkServiceEndpointResponse) {
	nse := ev.GetNetworkServiceEndpoint()
	name := nse.GetName()
	if name == "" {
		return
	}
	exp := nse.GetExpirationTime()
	switch {
	case ev.GetDeleted():
		f.remove(name, "unregistered")
	case exp != nil && exp.GetSeconds() < 0:
		f.remove(name, "unregistered (expiration -1)")
	case !slices.Contains(nse.GetNetworkServiceNames(), f.service):
		f.remove(name, "no longer serves the network service")
	default:
		var expires time.Time
		if exp != nil {
			expires = exp.AsTime()
		}
		f.add(ctx, name, expires)
	}
}

func (f *FullMesh) add(ctx context.Context, nse string, expires time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m, ok := f.members[nse]; ok {
		m.setExpiry(expires, f.opts.clock.Now())
		if !m.unlisted.IsZero() {
			m.unlisted = time.Time{}
			f.opts.logger.Info("load balancer endpoint listed again", "nse", nse, "conn", m.id)
		}
		return
	}
	if !expires.IsZero() && f.opts.clock.Now().After(expires.Add(f.opts.expiryGrace)) {
		return // a stale listing of an endpoint whose registration is over
	}
	m := &member{
		nse:  nse,
		id:   ConnectionID(f.name, f.service, nse),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	m.setExpiry(expires, f.opts.clock.Now())
	prev := f.closing[nse]
	delete(f.closing, nse)
	f.members[nse] = m
	f.opts.logger.Info("load balancer endpoint added", "nse", nse, "conn", m.id)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.runMember(ctx, m, prev)
	}()
}

func (f *FullMesh) remove(nse, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.members[nse]
	if !ok {
		return
	}
	delete(f.members, nse)
	f.closing[nse] = m.done
	f.opts.logger.Info("load balancer endpoint removed", "nse", nse, "conn", m.id, "reason", reason)
	close(m.stop)
}

// resync handles a full listing taken after the watch (re)connected. An
// endpoint it misses is not dropped at once: a registry that restarted
// comes back empty and fills again as the endpoints refresh their
// registrations, so a missing endpoint is kept until relistDeadline;
// evictExpired drops it then, unless it was listed again meanwhile.
func (f *FullMesh) resync(listed []string) {
	present := make(map[string]bool, len(listed))
	for _, n := range listed {
		present[n] = true
	}
	now := f.opts.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for nse, m := range f.members {
		switch {
		case present[nse]:
			m.unlisted = time.Time{}
		case m.unlisted.IsZero():
			m.unlisted = now
			f.opts.logger.Warn("load balancer endpoint not listed after the watch reconnected; kept while it may still register again",
				"nse", nse, "conn", m.id, "until", f.relistDeadline(m))
		}
	}
}

// relistDeadline is when an unlisted member is given up: when its last
// known registration expires, or one registration lifetime after the
// listing first missed it, whichever is later. A registry that was away
// longer than a registration lasts comes back after every expiry has
// passed, while its live endpoints are still retrying to register; each
// of them refreshes within a lifetime of the registry's return. Without a
// known expiry, the relist grace stands in for the lifetime.
func (f *FullMesh) relistDeadline(m *member) time.Time {
	if m.lifetime <= 0 {
		return m.unlisted.Add(f.opts.relistGrace)
	}
	return later(m.expires, m.unlisted.Add(m.lifetime))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (f *FullMesh) evictExpired() {
	now := f.opts.clock.Now()
	f.mu.Lock()
	expired := map[string]string{}
	for nse, m := range f.members {
		switch {
		case !m.unlisted.IsZero():
			if now.After(f.relistDeadline(m)) {
				expired[nse] = "not listed again within a registration lifetime of the watch's reconnect"
			}
		case !m.expires.IsZero() && now.After(m.expires.Add(f.opts.expiryGrace)):
			expired[nse] = "registration expired without refresh"
		}
	}
	f.mu.Unlock()
	for nse, reason := range expired {
		f.remove(nse, reason)
	}
}

// pruneClosing forgets members that have finished closing.
func (f *FullMesh) pruneClosing() {
	for nse, done := range f.closing {
		select {
		case <-done:
			delete(f.closing, nse)
		default:
		}
	}
}

// watchLoop opens the registry watch again and again, with backoff, until
// ctx is done.
func (f *FullMesh) watchLoop(ctx context.Context, msgs chan<- message) {
	wait := backoff.New(f.opts.backoffInitial, f.opts.backoffMax)
	for {
		received, err := f.watch(ctx, msgs)
		if ctx.Err() != nil {
			return
		}
		if received {
			wait.Reset()
		}
		d := wait.Next()
		f.opts.logger.Warn("registry watch broke, reconnecting", "service", f.service, "error", err, "after", d)
		if !backoff.Sleep(ctx, d) {
			return
		}
	}
}

func (f *FullMesh) query(watch bool) *registryapi.NetworkServiceEndpointQuery {
	return &registryapi.NetworkServiceEndpointQuery{
		NetworkServiceEndpoint: &registryapi.NetworkServiceEndpoint{NetworkServiceNames: []string{f.service}},
		Watch:                  watch,
	}
}

// watch runs one watch session: it opens the watch, lists the endpoints to
// drop those that disappeared while the watch was down, then forwards
// events until the stream breaks. received says whether the session got
// that far.
func (f *FullMesh) watch(ctx context.Context, msgs chan<- message) (received bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := f.registry.Find(sctx, f.query(true))
	if err != nil {
		return false, fmt.Errorf("open watch: %w", err)
	}
	listed, err := f.list(sctx)
	if err != nil {
		return false, err
	}
	if !send(ctx, msgs, message{resync: listed}) {
		return true, ctx.Err()
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return true, fmt.Errorf("watch: %w", err)
		}
		if !send(ctx, msgs, message{event: resp}) {
			return true, ctx.Err()
		}
	}
}

// list returns the names of the endpoints currently registered for the
// service (never nil).
func (f *FullMesh) list(ctx context.Context) ([]string, error) {
	stream, err := f.registry.Find(ctx, f.query(false))
	if err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	names := []string{}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list endpoints: %w", err)
		}
		nse := resp.GetNetworkServiceEndpoint()
		if resp.GetDeleted() || nse.GetExpirationTime().GetSeconds() < 0 && nse.GetExpirationTime() != nil {
			continue
		}
		names = append(names, nse.GetName())
	}
}

func send(ctx context.Context, msgs chan<- message, m message) bool {
	select {
	case msgs <- m:
		return true
	case <-ctx.Done():
		return false
	}
}
