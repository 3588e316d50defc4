package kubesource

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/causeway-net/causeway/internal/limits"
	"github.com/causeway-net/causeway/pkg/servicelb"
)

// Handler receives the model: a provider, or anything between.
type Handler interface {
	servicelb.ServiceHandler
	servicelb.EndpointsHandler
}

// TriggerHandler is a Handler that wants, before the endpoints they
// changed, the trigger times of the slice writes they carry (the
// TriggerTimeAnnotation of writes seen since the last delivery): the
// network programming latency ends when the provider has applied them.
type TriggerHandler interface {
	OnEndpointsTriggers(triggers []time.Time)
}

// Source feeds a Handler with the Services of one proxy name and their
// endpoints from the API server (see the package comment).
type Source struct {
	client  Client
	name    string
	node    string
	handler Handler
	log     *slog.Logger

	tracker  *tracker
	outage   *outage
	refusals *refusals // nil: no Events
	changed  func()
	kick     chan struct{}

	synced     atomic.Bool
	deliveries atomic.Uint64
	lastSync   atomic.Int64 // nanoseconds of the last delivery
}

// Stats is what a Source has done.
type Stats struct {
	// Synced says that both caches were filled once (deliveries begin).
	Synced bool `json:"synced"`
	// APIServerAway says that the last list or watch failed; Outages counts
	// the times it went away.
	APIServerAway bool   `json:"apiServerAway"`
	Outages       uint64 `json:"outages"`
	// Deliveries counts the hand-overs to the handler, LastDelivery is how
	// long the last one took (assembly and the handler's calls; in
	// nanoseconds in JSON).
	Deliveries   uint64        `json:"deliveries"`
	LastDelivery time.Duration `json:"lastDelivery"`
}

// New returns a source of the Services labelled with ProxyNameLabel=name
// and of the endpoints that the proxy of node publishes, delivering to h;
// Run starts it.
func New(client Client, name, node string, h Handler, opts ...Option) (*Source, error) {
	if client == nil || h == nil {
		return nil, errors.New("kubesource: client and handler are required")
	}
	if name == "" {
		return nil, errors.New("kubesource: the proxy name (value of " + ProxyNameLabel + ") is empty")
	}
	if node == "" {
		return nil, errors.New("kubesource: the node name is empty (the endpoints read are the node's own)")
	}
	o := newOptions(opts)
	log := o.log.With("proxyName", name)
	s := &Source{client: client, name: name, node: node, handler: h, log: log, outage: &outage{log: log}, changed: o.changed,
		kick: make(chan struct{}, 1)}
	refused := func(*corev1.Service, []problem) {}
	if o.eventNode != "" {
		s.refusals = newRefusals(client, o.eventNode, log)
		refused = s.refusals.report
	}
	s.tracker = newTracker(log, o.prefixes, refused, newEndpointFilter(o.pools, log))
	if o.refusals == nil {
		o.refusals = limits.New("causeway_proxy_service", log)
	}
	s.tracker.maxServices, s.tracker.refusals = o.maxSvcs, o.refusals
	if len(o.nsList) > 0 {
		s.tracker.namespaces = map[string]bool{}
		for _, ns := range o.nsList {
			s.tracker.namespaces[ns] = true
		}
		log.Info("Services served from these namespaces only", "namespaces", o.nsList)
	}
	return s, nil
}

// Run runs the informers and delivers the model to the handler whenever it
// changes, from the first time both caches are filled until ctx ends; it
// returns once the informers have stopped.
func (s *Source) Run(ctx context.Context) {
	ictx := withClientGoLogger(ctx, s.log)
	svcs := s.serviceInformer()
	slices := s.sliceInformer()
	svcReg, err1 := svcs.AddEventHandler(s.serviceHandler())
	sliceReg, err2 := slices.AddEventHandler(s.sliceHandler(time.Now()))
	if err := errors.Join(err1, err2); err != nil {
		s.log.Error("service informers not started", "error", err) // only on an informer that runs already
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	if s.refusals != nil {
		wg.Go(func() { s.refusals.run(ctx) })
	}
	wg.Go(func() { svcs.RunWithContext(ictx) })
	wg.Go(func() { slices.RunWithContext(ictx) })
	start := time.Now()
	if !cache.WaitForCacheSync(ctx.Done(), svcReg.HasSynced, sliceReg.HasSynced) {
		return
	}
	s.synced.Store(true)
	s.tracker.markDirty()
	s.deliver()
	svcN, epN := s.counts()
	s.log.Info("services synced from the API server", "services", svcN, "endpointSlices", epN, "took", time.Since(start).String())
	s.deliverLoop(ctx)
}

// request asks for a delivery; it never blocks.
func (s *Source) request() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// deliverLoop delivers on request until ctx ends.
func (s *Source) deliverLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		s.deliver()
	}
}

// deliver hands the handler what changed: endpoints first, so that a new
// service port starts with its endpoints.
func (s *Source) deliver() {
	start := time.Now()
	svcs, eps, changedSvcs, changedEps, triggers := s.tracker.snapshot()
	if !changedSvcs && !changedEps {
		return
	}
	if changedEps {
		if h, ok := s.handler.(TriggerHandler); ok && len(triggers) > 0 {
			h.OnEndpointsTriggers(triggers)
		}
		s.handler.OnEndpointsUpdate(eps)
	}
	if changedSvcs {
		s.handler.OnServiceUpdate(svcs)
	}
	s.lastSync.Store(int64(time.Since(start)))
	s.deliveries.Add(1)
	if changedSvcs {
		s.changed()
	}
}

// Stats returns what the source has done.
func (s *Source) Stats() Stats {
	away, n := s.outage.state()
	return Stats{Synced: s.synced.Load(), APIServerAway: away, Outages: n,
		Deliveries: s.deliveries.Load(), LastDelivery: time.Duration(s.lastSync.Load())}
}

// Services returns the Services served (their selectors and ports feed a
// Publisher); the objects are the informer's and must not be changed.
func (s *Source) Services() []*corev1.Service { return s.tracker.services() }

func (s *Source) counts() (services, slices int) { return s.tracker.counts() }
