package feed

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/causeway-net/causeway/internal/limits"
	"github.com/causeway-net/causeway/internal/tasks"
	"github.com/causeway-net/causeway/internal/yamlfile"
	"github.com/causeway-net/causeway/pkg/proxy"
	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/filesource"
	"github.com/causeway-net/causeway/pkg/servicelb/kubesource"
	"github.com/causeway-net/causeway/pkg/servicelb/provider"
)

// LB is the service load balancer of the proxy: the provider cfg names,
// fed with the services of the watched services file and with the
// addresses of the connected targets for the ports that take them as
// endpoints, or from the API server (kube.go).
type LB struct {
	cfg      Config
	log      *slog.Logger
	proxy    *proxy.Proxy
	provider servicelb.Provider
	events   *eventCounter
	syncs    *syncMetrics
	refusals *limits.Refusals // of the limits: relay connections, Services
	// idRefusals are the targets left out for their identity (kube.go).
	idRefusals *limits.Refusals
	kube       *kubeServices // the Kubernetes source; nil with the file

	changed chan struct{} // capacity 1: the file changed

	mu       sync.Mutex
	file     *filesource.File // last good version (nil: none yet)
	loaded   time.Time
	rejected *Rejection
	accepted uint64
	rejects  uint64
	// withdrawn are the entries of file left out for colliding with the
	// proxy's state, prefixes the prefixes handed to the targets, held
	// whether the targets keep theirs instead (see resolve).
	withdrawn []string
	prefixes  []netip.Prefix
	held      bool
}

// Rejection is the last version of the services file that was refused:
// when, and why (each problem names its entry).
type Rejection struct {
	Time  time.Time `json:"time"`
	Error string    `json:"error"`
}

// Start starts the service load balancer: it removes what a run
// configured otherwise left (the other provider's table), starts the
// provider, feeds it from cfg's source, and runs its sync loop. It comes
// after the proxy (it reads the connected targets, and hands the service
// prefixes to the targets' IP contexts) and before the proxy's endpoint, so
// that the first target already gets its routes. stop ends the feeding and
// the sync loop, closes the provider and runs CleanupLeftovers: no table of
// ours stays.
func Start(ctx context.Context, cfg Config, p *proxy.Proxy, log *slog.Logger) (_ *LB, stop func() error, err error) {
	s := &LB{cfg: cfg, log: log, proxy: p, events: newEventCounter(log), syncs: newSyncMetrics(),
		refusals: limits.New("causeway_proxy_service", log), idRefusals: kubesource.NewIdentityRefusals(kubesource.WithLogger(log)),
		changed: make(chan struct{}, 1)}
	if err := provider.CleanupLeftovers(cfg.NetNS); err != nil {
		return nil, nil, err
	}
	s.provider, err = provider.New(provider.Config{
		Provider: cfg.Provider, NetNS: cfg.NetNS, Logger: log, SyncPeriod: cfg.SyncPeriod,
		PortRange: cfg.PortRange, UDPIdleTimeout: cfg.UDPIdleTimeout, Recorder: s.events, OnSync: s.syncs.observe,
		MaxTCPPerClient: cfg.MaxConnectionsPerClient, Refusals: s.refusals,
	})
	if err != nil {
		return nil, nil, err
	}
	stopProvider := func() error {
		p.SetServicePrefixes(nil)
		return errors.Join(s.provider.Close(), s.provider.CleanupLeftovers())
	}
	t := tasks.New(ctx)
	if cfg.Kube != nil {
		s.kube, err = s.startKube(t, *cfg.Kube)
	} else {
		s.startFile(t)
	}
	if err != nil {
		_ = t.Stop()
		return nil, nil, errors.Join(err, stopProvider())
	}
	// The first sync (at once) takes what the source gave.
	t.Go(s.provider.SyncLoop)
	return s, func() error {
		_ = t.Stop()
		return stopProvider()
	}, nil
}

// startFile feeds the provider from the watched services file and the
// connected targets.
func (s *LB) startFile(t *tasks.Group) {
	f, err := filesource.LoadFor(s.cfg.File, s.facts())
	if err == nil {
		s.accept(f)
	}
	// Otherwise the proxy serves its VIPs without the services, and the
	// watch's first read reports the problem (logRejection); a fixed file
	// is taken up by the watch. Meanwhile the targets keep the service
	// routes they carry (see resolve).
	targets, unwatch := s.proxy.WatchTargets()
	svcs, eps := s.feed(nil, nil)
	t.Go(func(ctx context.Context) {
		defer unwatch()
		s.feedLoop(ctx, targets, svcs, eps)
	})
	t.Go(func(ctx context.Context) {
		err := yamlfile.WatchParsed(ctx, s.cfg.File, s.parse, f, s.accept,
			yamlfile.WithLogger(s.log), yamlfile.WithRejectLog(s.logRejection), yamlfile.WithRejectHook(s.reject), yamlfile.WithRecoverHook(s.recovered))
		if err != nil {
			s.log.Error("services file watch stopped; the last good services stay", "error", err)
		}
	})
}

// facts are what the services may not collide with: the VIPs in force
// and the bridge addresses.
func (s *LB) facts() filesource.Facts {
	return filesource.Facts{VIPs: s.proxy.VIPs(), Bridge: s.proxy.BridgeAddrs()}
}

// parse parses a version of the file for the watch: a version that
// collides with the proxy's state is refused like any broken one.
func (s *LB) parse(data []byte) (*filesource.File, error) {
	return filesource.ParseFor(data, s.facts())
}

// accept takes a new good version of the file (on the watch goroutine).
func (s *LB) accept(f *filesource.File) {
	s.mu.Lock()
	s.file, s.loaded, s.rejected = f, time.Now(), nil
	s.accepted++
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// reject records a refused version; the last good one stays in force.
func (s *LB) reject(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejected = &Rejection{Time: time.Now(), Error: err.Error()}
	s.rejects++
}

// logRejection says what a version of the file that cannot be used means
// for the services: none yet, or the last good ones kept.
func (s *LB) logRejection(err error) {
	s.mu.Lock()
	known := s.file != nil
	s.mu.Unlock()
	path := s.cfg.File
	switch missing := errors.Is(err, fs.ErrNotExist); {
	case missing && !known:
		s.log.Warn("services file does not exist; no services until it appears", "path", path)
	case missing:
		s.log.Warn("services file removed; keeping the last good services until it is back", "path", path)
	case !known:
		s.log.Error("services file refused; no services until a valid version appears, the targets keep the service routes they have",
			"path", path, "error", err)
	default:
		s.log.Error("services file refused; keeping the last good services", "path", path, "error", err)
	}
}

// recovered clears the last rejection: the file is back to the services in
// force (the broken edit was undone).
func (s *LB) recovered() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejected = nil
}

// feedLoop hands the provider the services and endpoints again whenever
// the file or the connected targets change, until ctx ends.
func (s *LB) feedLoop(ctx context.Context, targets <-chan struct{}, svcs []servicelb.Service, eps []servicelb.Endpoints) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.changed:
		case <-targets:
		}
		svcs, eps = s.feed(svcs, eps)
	}
}

// feed computes the services and endpoints and hands over what differs
// from the last ones (lastSvcs, lastEps); it returns what it handed over.
func (s *LB) feed(lastSvcs []servicelb.Service, lastEps []servicelb.Endpoints) ([]servicelb.Service, []servicelb.Endpoints) {
	f := s.resolve()
	var addrs []netip.Addr
	if f.UsesTargets() {
		addrs = s.proxy.TargetAddrs()
	}
	s.setHairpin(len(f.Services))
	svcs, eps := f.ServiceList(), f.EndpointList(addrs)
	// Endpoints first: a new service port starts with its endpoints.
	if lastEps == nil || !reflect.DeepEqual(eps, lastEps) {
		s.provider.OnEndpointsUpdate(eps)
	}
	if lastSvcs == nil || !reflect.DeepEqual(svcs, lastSvcs) {
		s.provider.OnServiceUpdate(svcs)
	}
	return svcs, eps
}

// resolve returns the services in force: the last good version of the
// file without the entries that collide with the proxy's state now (a VIP
// that came after the file; logged when that changes), and hands its
// prefixes to the targets' IP contexts. With no good version yet (the
// file broken since the start) it has no services, and the targets keep
// the service routes they carry: a restart with a broken file does not
// take the last good routes away from them.
func (s *LB) resolve() *filesource.File {
	s.mu.Lock()
	f := s.file
	s.mu.Unlock()
	var prefixes []netip.Prefix
	held := f == nil
	if held {
		s.proxy.HoldServiceRoutes()
		f = &filesource.File{}
	} else {
		var withdrawn []error
		f, withdrawn = f.Resolve(s.facts())
		s.noteWithdrawn(withdrawn)
		prefixes = f.RoutePrefixes()
		s.proxy.SetServicePrefixes(prefixes)
	}
	s.mu.Lock()
	s.prefixes, s.held = prefixes, held
	s.mu.Unlock()
	return f
}

// noteWithdrawn records the entries of the file in force that collide
// with the proxy's state, and logs them when they change.
func (s *LB) noteWithdrawn(errs []error) {
	msgs := make([]string, 0, len(errs))
	for _, err := range errs {
		msgs = append(msgs, err.Error())
	}
	s.mu.Lock()
	changed := !slices.Equal(msgs, s.withdrawn)
	s.withdrawn = msgs
	s.mu.Unlock()
	switch {
	case !changed:
	case len(msgs) > 0:
		s.log.Error("entries of the services file in force withdrawn: they collide with the proxy's state; the other services are served",
			"withdrawn", msgs)
	default:
		s.log.Info("no entry of the services file in force collides with the proxy's state any more: all are served")
	}
}

// State is the service load balancer in the proxy's -debug.
type State struct {
	File     string `json:"file,omitempty"`
	Provider string `json:"provider"`
	// Kubernetes is the Kubernetes source's state (with it, File is
	// empty and Loaded, Rejected, Withdrawn are unused).
	Kubernetes *KubeState `json:"kubernetes,omitempty"`
	// Loaded is when the configuration in force was read; Rejected the
	// last refused version since (the configuration in force stays).
	Loaded   time.Time  `json:"loaded,omitzero"`
	Rejected *Rejection `json:"rejected,omitempty"`
	// Withdrawn are the entries of the configuration in force left out
	// for colliding with the proxy's state (a VIP that came after it),
	// each with the reason.
	Withdrawn []string `json:"withdrawn,omitempty"`
	// Prefixes are the prefixes handed to the targets; RoutesHeld says
	// that no version of the file was good yet, so that the targets keep
	// the service routes they carry.
	Prefixes   []netip.Prefix `json:"prefixes"`
	RoutesHeld bool           `json:"routesHeld,omitempty"`
	// Ports are the served service ports with their endpoints, sockets or
	// chains and counters; Events the socket events by service port and
	// reason (userspace).
	Ports  []servicelb.PortState                       `json:"ports"`
	Events map[string]map[servicelb.EventReason]uint64 `json:"events,omitempty"`
	Stats  *servicelb.SyncStats                        `json:"nftables,omitempty"`
}

// State is the load balancer now.
func (s *LB) State() *State {
	s.mu.Lock()
	st := &State{File: s.cfg.File, Provider: s.cfg.Provider, Loaded: s.loaded, Rejected: s.rejected,
		Withdrawn: s.withdrawn, Prefixes: s.prefixes, RoutesHeld: s.held}
	s.mu.Unlock()
	if s.kube != nil {
		st.Kubernetes = s.kube.state()
	}
	if in, ok := s.provider.(servicelb.Inspector); ok {
		st.Ports = in.PortStates()
	}
	st.Events = s.events.byPort()
	if r, ok := s.provider.(servicelb.StatsReporter); ok {
		stats := r.Stats()
		st.Stats = &stats
	}
	return st
}

// eventCounter logs the sockets' events (through a LogRecorder) and counts
// them by service port and reason.
type eventCounter struct {
	log *servicelb.LogRecorder

	mu     sync.Mutex
	counts map[string]map[servicelb.EventReason]uint64
}

func newEventCounter(log *slog.Logger) *eventCounter {
	return &eventCounter{log: servicelb.NewLogRecorder(log), counts: map[string]map[servicelb.EventReason]uint64{}}
}

// Record implements servicelb.Recorder.
func (c *eventCounter) Record(e servicelb.Event) {
	c.log.Record(e)
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.counts[e.Service.String()]
	if m == nil {
		m = map[servicelb.EventReason]uint64{}
		c.counts[e.Service.String()] = m
	}
	m[e.Reason]++
}

func (c *eventCounter) byPort() map[string]map[servicelb.EventReason]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.counts) == 0 {
		return nil
	}
	out := make(map[string]map[servicelb.EventReason]uint64, len(c.counts))
	for k, m := range c.counts {
		out[k] = maps.Clone(m)
	}
	return out
}

// setHairpin decides, in one place for both sources, whether the targets'
// bridge ports are in hairpin mode, given the number of services: a
// target may be an endpoint of its own request, and with the nftables
// provider (which translates in the bridge, without source NAT) the reply
// then leaves the bridge by the port it came in; so every target port is
// in hairpin mode while that provider has services. The proxy makes it an
// attribute of each target port (dataplane.Port.Hairpin), which the
// dataplane sets as it enslaves the port.
func (s *LB) setHairpin(services int) {
	s.proxy.SetTargetHairpin(s.cfg.Provider == servicelb.ProviderNftables && services > 0)
}
