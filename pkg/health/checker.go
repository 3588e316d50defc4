// Package health serves the standard gRPC health service (grpc.health.v1)
// with three probe services, Startup, Readiness and Liveness, each of which
// aggregates named subservices: a probe is SERVING only while every
// subservice registered to it is SERVING. A subservice may instead be a
// warning of a probe (RegisterWarning): while it fails, the probe keeps its
// state and its answers carry the warning's text (in the WarningHeader
// metadata, which Probe reads). Kubernetes probes query it with
// grpc_health_probe -addr=unix:///tmp/health.sock -service=Readiness, as for
// Meridio's proxy.
package health

import (
	"log/slog"
	"slices"
	"sync"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Probe services.
const (
	Startup   = "Startup"
	Readiness = "Readiness"
	Liveness  = "Liveness"
)

// Subservices of the proxy, with Meridio's names.
const (
	IPAMCli     = "IPAMCli"     // connection to the IPAM service
	NSPCli      = "NSPCli"      // connection to the configuration server (NSP)
	NSMEndpoint = "NSMEndpoint" // the proxy's own NSE answers its health check
	Egress      = "Egress"      // at least one load balancer is connected
	// NSMRegistry is new in Causeway: the proxy's NSE registration is in
	// force (it is retried for as long as the proxy runs). Part of
	// Readiness only: an NSM control-plane outage must not restart a proxy
	// whose data path still forwards.
	NSMRegistry = "NSMRegistry"
	// Datapath is new in Causeway: the datapath check of the LB nexthops
	// and targets. A warning of Readiness: a neighbour that stops
	// answering is reported, never a reason to restart or unready a proxy
	// that still forwards over the others.
	Datapath = "Datapath"
)

// Checker owns a gRPC health server and the aggregation of subservices into
// probe services. It is safe for concurrent use.
type Checker struct {
	srv *health.Server
	log *slog.Logger

	mu       sync.Mutex
	probes   map[string][]string // probe → its subservices, in registration order
	warnings map[string][]string // probe → its warning subservices, in registration order
	serving  map[string]bool     // subservice → serving
	texts    map[string]string   // warning subservice → its text while it fails
	probeOK  map[string]bool     // probe → last computed state
}

// Option tunes New.
type Option func(*Checker)

// WithLogger sets the logger of probe state changes.
func WithLogger(l *slog.Logger) Option { return func(c *Checker) { c.log = l } }

// New returns a checker whose probe services Startup, Readiness and Liveness
// have no subservices yet and are therefore SERVING, as is the overall
// service "".
func New(opts ...Option) *Checker {
	c := &Checker{
		srv:      health.NewServer(),
		log:      slog.Default(),
		probes:   map[string][]string{},
		warnings: map[string][]string{},
		serving:  map[string]bool{},
		texts:    map[string]string{},
		probeOK:  map[string]bool{},
	}
	for _, o := range opts {
		o(c)
	}
	for _, p := range []string{Startup, Readiness, Liveness} {
		c.addProbe(p)
	}
	return c
}

// addProbe creates a probe without subservices, hence SERVING. Called with
// c.mu held or before c is shared.
func (c *Checker) addProbe(probe string) {
	c.probes[probe] = nil
	c.probeOK[probe] = true
	c.srv.SetServingStatus(probe, healthpb.HealthCheckResponse_SERVING)
}

// Server returns the grpc.health.v1 service to register on a gRPC server
// (its Check answers carry the probes' warnings).
func (c *Checker) Server() healthpb.HealthServer { return warningServer{c.srv, c} }

// Register adds subservices to a probe (any probe name may be used; the
// three standard ones exist from the start). A subservice not seen before
// starts NOT_SERVING. A subservice may belong to several probes.
func (c *Checker) Register(probe string, subservices ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.register(probe, c.probes, false, subservices) {
		c.recompute(probe)
	}
}

// register adds subservices to probe's list in lists (c.probes or
// c.warnings); a subservice not seen before starts with serving. It
// reports false when probe is a subservice. Called with c.mu held.
func (c *Checker) register(probe string, lists map[string][]string, serving bool, subservices []string) bool {
	if _, isSub := c.serving[probe]; isSub {
		c.log.Error("health: a subservice cannot be a probe", "probe", probe)
		return false
	}
	if _, isProbe := c.probes[probe]; !isProbe {
		c.addProbe(probe)
	}
	for _, s := range subservices {
		if _, isProbe := c.probes[s]; isProbe {
			c.log.Error("health: a probe cannot be a subservice", "probe", probe, "subservice", s)
			continue
		}
		if slices.Contains(lists[probe], s) {
			continue
		}
		lists[probe] = append(lists[probe], s)
		if _, known := c.serving[s]; !known {
			c.serving[s] = serving
			c.srv.SetServingStatus(s, toStatus(serving))
		}
	}
	return true
}

// SetServing sets the state of a subservice and recomputes every probe it
// belongs to. A probe's state is derived and cannot be set: such a call is
// logged and ignored.
func (c *Checker) SetServing(subservice string, serving bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.settable(subservice) {
		c.setLocked(subservice, serving)
	}
}

// settable reports whether subservice may be set (it is no probe), logging
// the refusal. Called with c.mu held.
func (c *Checker) settable(subservice string) bool {
	if _, isProbe := c.probes[subservice]; isProbe {
		c.log.Error("health: a probe service cannot be set directly", "probe", subservice)
		return false
	}
	return true
}

// setLocked sets a subservice's state and recomputes every probe it
// belongs to. Called with c.mu held.
func (c *Checker) setLocked(subservice string, serving bool) {
	if prev, known := c.serving[subservice]; known && prev == serving {
		return
	}
	c.serving[subservice] = serving
	c.srv.SetServingStatus(subservice, toStatus(serving))
	for p, subs := range c.probes {
		if slices.Contains(subs, subservice) {
			c.recompute(p)
		}
	}
}

// recompute derives a probe's state from its subservices and publishes a
// change. Called with c.mu held.
func (c *Checker) recompute(probe string) {
	ok := true
	for _, s := range c.probes[probe] {
		ok = ok && c.serving[s]
	}
	if ok == c.probeOK[probe] {
		return
	}
	c.probeOK[probe] = ok
	c.srv.SetServingStatus(probe, toStatus(ok))
	if ok {
		c.log.Info("health: probe is serving", "probe", probe)
		return
	}
	states := make(map[string]string, len(c.probes[probe]))
	for _, s := range c.probes[probe] {
		states[s] = toStatus(c.serving[s]).String()
	}
	c.log.Warn("health: probe is not serving", "probe", probe, "subservices", states)
}

func toStatus(serving bool) healthpb.HealthCheckResponse_ServingStatus {
	if serving {
		return healthpb.HealthCheckResponse_SERVING
	}
	return healthpb.HealthCheckResponse_NOT_SERVING
}
