package proxyd

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"google.golang.org/grpc"

	"github.com/causeway-net/causeway/pkg/health"
	"github.com/causeway-net/causeway/pkg/nexthopcheck"
	"github.com/causeway-net/causeway/pkg/nsm/chain/connlink"
	"github.com/causeway-net/causeway/pkg/nsm/clientproof"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
	"github.com/causeway-net/causeway/pkg/nsm/endpoint"
	"github.com/causeway-net/causeway/pkg/nsm/fullmesh"
	"github.com/causeway-net/causeway/pkg/nsm/nsmlog"
	"github.com/causeway-net/causeway/pkg/proxy"
	"github.com/causeway-net/causeway/pkg/proxyd/vipsource"
	"github.com/causeway-net/causeway/pkg/servicelb/feed"
)

// Daemon is a running proxy: its components (components.go), started in
// order by Start and stopped in the reverse order by Stop.
type Daemon struct {
	cfg  *Config
	log  *slog.Logger
	opts options

	// Set by the components as they start, for those after them.
	health    *health.Checker
	dp        Dataplane
	creds     *credentials.Credentials
	nsmDial   []grpc.DialOption
	nsmServer []grpc.ServerOption
	ipamCC    *grpc.ClientConn
	vips      vipsource.VIPSource
	proxy     *proxy.Proxy
	links     *connlink.Matcher
	nsm       nsmClient
	mesh      *fullmesh.FullMesh
	ep        *endpoint.Endpoint
	services  *feed.LB // nil when the service load balancer is off

	// The ledger of the targets' tokens (targetidentity.go); nil in
	// insecure mode.
	ledgerStats func() clientproof.LedgerStats

	// The datapath checks (nexthopcheck.go): the LB nexthops'; the
	// targets', nil unless NSM_TARGET_CHECK_INTERVAL.
	hopCheck, targetCheck *nexthopcheck.Checker

	registered *firstTime // the endpoint's first registration
	vipsKnown  *firstTime // the VIP source's first list

	running []running // the started components, in start order

	failOnce sync.Once
	failed   chan struct{} // closed when a vital component stops by itself
	failErr  error
	stopping atomic.Bool
	stopOnce sync.Once
	stopErr  error
}

// Run starts the proxy and blocks until ctx ends or a vital component
// fails, then shuts down and returns. The start-up order follows Meridio's
// proxy: health, dataplane and its link table, IPAM and NSP connections, the
// proxy state machine (which waits for its bridge addresses), the full mesh
// toward the load balancers, the endpoint for the targets, and the VIPs.
// opts are for tests; the production daemon uses none.
func Run(ctx context.Context, cfg *Config, log *slog.Logger, opts ...Option) error {
	d, err := Start(ctx, cfg, log, opts...)
	if err != nil {
		return err
	}
	var runErr error
	select {
	case <-ctx.Done():
		log.Info("stopping on signal")
	case <-d.Failed():
		runErr = d.Err()
	}
	return errors.Join(runErr, d.Stop())
}

// Start starts the proxy and returns once every component runs (the proxy
// state machine has its bridge addresses, the endpoint is registered). ctx
// bounds the start-up; the daemon then runs until Stop. On error nothing is
// left running.
func Start(ctx context.Context, cfg *Config, log *slog.Logger, opts ...Option) (*Daemon, error) {
	d := &Daemon{cfg: cfg, log: log, failed: make(chan struct{}),
		registered: newFirstTime(), vipsKnown: newFirstTime()}
	for _, o := range opts {
		o(&d.opts)
	}
	if !cfg.FamilyNamed() {
		log.Warn("NSM_IP_FAMILY is not ipv4, ipv6 or dualstack: serving both families, as Meridio's proxy does", "NSM_IP_FAMILY", cfg.IPFamily)
	}
	if !d.opts.keepSDKLogger {
		nsmlog.Install(log)
		ctx = nsmlog.WithContext(ctx, log)
	}
	if err := d.startAll(ctx, d.components()); err != nil {
		return nil, errors.Join(err, d.Stop())
	}
	log.Info("proxy started", "name", cfg.Name, "service", cfg.ServiceName, "lbService", cfg.NetworkServiceName,
		"conduit", cfg.Conduit, "trench", cfg.Trench, "node", cfg.Host, "endpoint", d.ep.URL().String())
	return d, nil
}

// Failed is closed when a vital component (the full mesh, the endpoint's
// server) stopped by itself; Err then says why. The daemon must be stopped.
func (d *Daemon) Failed() <-chan struct{} { return d.failed }

// Err is the failure once Failed is closed.
func (d *Daemon) Err() error {
	select {
	case <-d.failed:
		return d.failErr
	default:
		return nil
	}
}

func (d *Daemon) fail(err error) {
	if d.stopping.Load() {
		return
	}
	d.failOnce.Do(func() {
		d.log.Error("vital component stopped", "error", err)
		d.failErr = err
		close(d.failed)
	})
}

// Proxy is the proxy state machine.
func (d *Daemon) Proxy() *proxy.Proxy { return d.proxy }

// Health is the health checker behind the health socket.
func (d *Daemon) Health() *health.Checker { return d.health }

// EndpointURL is where the endpoint for the targets serves.
func (d *Daemon) EndpointURL() *url.URL { return d.ep.URL() }

// LBConnections are the established connections of the full mesh, by load
// balancer endpoint name.
func (d *Daemon) LBConnections() map[string]*networkservice.Connection { return d.mesh.Connections() }

// Stop stops the components in the reverse order of their start, each one
// stopped and waited for before the next: the VIPs and observability go,
// the endpoint is unregistered, the full mesh stops and leaves the LB
// connections established (unlike Meridio's proxy, which closes them), the
// NSM chains end, address releases pending from before the stop are
// forced, and then the IPAM and NSP connections, the dataplane and the
// health server are closed. The kernel keeps the bridge, its ports and
// addresses, the ECMP routes and the VIP rules, and goes on forwarding, so
// that a proxy restarted in the same namespace takes over without a gap; a
// pod that goes away takes its namespace with it, and NSM's expiry closes
// the connections it left (docs/reliability.md). A connection that closes
// during the stop keeps its addresses leased (proxy.Retain). Stop is
// idempotent.
func (d *Daemon) Stop() error {
	d.stopOnce.Do(func() { d.stopErr = d.stop() })
	return d.stopErr
}

func (d *Daemon) stop() error {
	d.stopping.Store(true)
	if d.proxy != nil {
		d.proxy.Retain()
	}
	return d.stopAll()
}
