package leader

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/pkg/ipam"
)

// Gate serves ipam.v1.Ipam from the engine of the moment, and refuses with
// Unavailable while there is none. It also passes the configuration
// server's conduit lists to the engine (and the last one to each new
// engine), and collects the engine's metrics. The zero value refuses.
type Gate struct {
	ipamv1.UnimplementedIpamServer

	mu     sync.RWMutex
	engine *ipam.Engine
	server *ipam.Server
	list   []string // the last conduit list; nil before the first
	listed bool
	leader string // the Lease's holder as last seen; "" before
	// OnChange, if set, is called (under the gate's lock) with true when an
	// engine starts serving and false when it stops.
	OnChange func(serving bool)
	// Standby, if set, answers the calls while no engine serves here (a
	// Forwarder); nil refuses them with Unavailable.
	Standby ipamv1.IpamServer
}

var (
	_ ipamv1.IpamServer    = (*Gate)(nil)
	_ ipam.ConduitSyncer   = (*Gate)(nil)
	_ prometheus.Collector = (*Gate)(nil)
)

// notServing is the error of a call while the replica does not serve.
var notServing = status.Error(codes.Unavailable, "this IPAM replica does not serve now (it does not hold the leader Lease, or is reloading the store); retry: the serving replica answers")

// Open makes e the serving engine, after giving it the last conduit list.
func (g *Gate) Open(e *ipam.Engine) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.listed {
		e.SyncConduits(g.list)
	}
	g.engine, g.server = e, ipam.NewServer(e)
	if g.OnChange != nil {
		g.OnChange(true)
	}
}

// Shut stops serving; calls from then on are refused. It returns the engine
// that served (nil if none), for the caller to close.
func (g *Gate) Shut() *ipam.Engine {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.engine
	g.engine, g.server = nil, nil
	if e != nil && g.OnChange != nil {
		g.OnChange(false)
	}
	return e
}

// Serving reports whether an engine serves.
func (g *Gate) Serving() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.server != nil
}

// current returns what answers a call now: the serving engine's server,
// else the standby, else nil.
func (g *Gate) current() ipamv1.IpamServer {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.server != nil {
		return g.server
	}
	return g.Standby
}

// Allocate implements ipam.v1.Ipam.
func (g *Gate) Allocate(ctx context.Context, c *ipamv1.Child) (*ipamv1.Prefix, error) {
	s := g.current()
	if s == nil {
		return nil, notServing
	}
	return s.Allocate(ctx, c)
}

// Release implements ipam.v1.Ipam.
func (g *Gate) Release(ctx context.Context, c *ipamv1.Child) (*emptypb.Empty, error) {
	s := g.current()
	if s == nil {
		return nil, notServing
	}
	return s.Release(ctx, c)
}

// SyncConduits implements ipam.ConduitSyncer: the list goes to the serving
// engine and is kept for the next.
func (g *Gate) SyncConduits(names []string) ipam.ConduitChanges {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.list, g.listed = append([]string(nil), names...), true
	if g.engine == nil {
		return ipam.ConduitChanges{}
	}
	return g.engine.SyncConduits(names)
}

// SetLeader records the Lease's holder (Elect's OnNewLeader), which the
// metrics name.
func (g *Gate) SetLeader(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.leader = id
}

var (
	descServing = prometheus.NewDesc("causeway_ipam_serving",
		"1 on the replica whose engine serves (it holds the Lease and its store is not fenced), 0 on the others.", nil, nil)
	descLeader = prometheus.NewDesc("causeway_ipam_leader",
		"1, labelled with the holder of the replicas' Lease as this replica last saw it.", []string{"leader"}, nil)
)

// Describe implements prometheus.Collector; it describes nothing (an
// unchecked collector), since the engine behind it comes and goes.
func (g *Gate) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector: whether this replica serves,
// who leads, and the serving engine's metrics (none while it does not
// serve).
func (g *Gate) Collect(ch chan<- prometheus.Metric) {
	g.mu.RLock()
	e, leader := g.engine, g.leader
	g.mu.RUnlock()
	serving := 0.0
	if e != nil {
		serving = 1
		e.Collect(ch)
	}
	ch <- prometheus.MustNewConstMetric(descServing, prometheus.GaugeValue, serving)
	if leader != "" {
		ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, 1, leader)
	}
}

// NodeNames returns the serving engine's nodes (none while it does not
// serve): a deleted node is freed by the leader only.
func (g *Gate) NodeNames() []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.engine == nil {
		return nil
	}
	return g.engine.NodeNames()
}

// FreeNode frees a deleted node's subnets in the serving engine (nothing
// while it does not serve).
func (g *Gate) FreeNode(name string) (int, time.Time) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.engine == nil {
		return 0, time.Time{}
	}
	return g.engine.FreeNode(name)
}
