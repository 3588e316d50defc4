package proxyd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/client"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/heal"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/sendfd"
	registryclient "github.com/networkservicemesh/sdk/pkg/registry/chains/client"
	registrynull "github.com/networkservicemesh/sdk/pkg/registry/common/null"
	"github.com/networkservicemesh/sdk/pkg/tools/grpcutils"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/plaintext"
	"github.com/causeway-net/causeway/pkg/config"
	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/health"
	nsmbackoff "github.com/causeway-net/causeway/pkg/nsm/backoff"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
	"github.com/causeway-net/causeway/pkg/nsm/egress"
	"github.com/causeway-net/causeway/pkg/nsm/endpoint"
	"github.com/causeway-net/causeway/pkg/nsm/fullmesh"
	"github.com/causeway-net/causeway/pkg/nsm/interfacemonitor"
	"github.com/causeway-net/causeway/pkg/nsm/ipcontext"
	"github.com/causeway-net/causeway/pkg/nsm/keepmech"
	"github.com/causeway-net/causeway/pkg/nsm/liveness"
	"github.com/causeway-net/causeway/pkg/nsm/mtu"
	"github.com/causeway-net/causeway/pkg/nsm/nsmlog"
	"github.com/causeway-net/causeway/pkg/proxy"
)

// Daemon is a running proxy. Start builds it; Stop tears it down in the
// reverse order of start-up.
type Daemon struct {
	cfg    *Config
	log    *slog.Logger
	opts   options
	health *health.Checker
	creds  *credentials.Credentials
	dp     Dataplane
	ipamCC *grpc.ClientConn
	nspCC  *grpc.ClientConn
	nsmCC  *grpc.ClientConn // connection monitor (recovery of LB connections)
	proxy  *proxy.Proxy
	mesh   *fullmesh.FullMesh
	ep     *endpoint.Endpoint

	wg        sync.WaitGroup // background goroutines, stopped by cancel
	cancels   []context.CancelFunc
	nsmCancel context.CancelFunc // NSM client chains, after the mesh closed its connections

	failOnce sync.Once
	failed   chan struct{} // closed when a vital component stops by itself
	failErr  error
	stopping atomic.Bool
	stopOnce sync.Once
	stopErr  error
}

// Run starts the proxy and blocks until ctx ends or a vital component
// fails, then shuts down and returns. The start-up order follows Meridio's
// proxy: health, dataplane and link monitor, IPAM and NSP connections, the
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
	d := &Daemon{cfg: cfg, log: log, failed: make(chan struct{})}
	for _, o := range opts {
		o(&d.opts)
	}
	if !d.opts.keepSDKLogger {
		nsmlog.Install(log)
	}
	if err := d.start(ctx); err != nil {
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

func (d *Daemon) background(ctx context.Context, fn func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	d.cancels = append(d.cancels, cancel)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		fn(ctx)
	}()
}

func (d *Daemon) start(ctx context.Context) error {
	cfg := d.cfg
	// Background work lives until stop, not until ctx: stop needs it to
	// shut down in order.
	bg := context.WithoutCancel(ctx)

	// 1. Health.
	d.health = health.New(health.WithLogger(d.log))
	d.health.Register(health.Readiness, health.IPAMCli, health.NSPCli, health.NSMEndpoint, health.Egress, health.NSMRegistry)
	d.health.Register(health.Liveness, health.NSMEndpoint)
	lis, err := health.ListenUnix(cfg.HealthSocket)
	if err != nil {
		return fmt.Errorf("health socket %s: %w", cfg.HealthSocket, err)
	}
	d.background(bg, func(ctx context.Context) {
		if err := d.health.Serve(ctx, lis); err != nil {
			d.log.Error("health server stopped", "error", err)
		}
	})

	// 2. Dataplane: bridge, sysctls, table, link monitor.
	if d.opts.dataplane != nil {
		d.dp = d.opts.dataplane
	} else {
		dp, err := dataplane.New(ctx, dataplane.Options{
			BridgeName:     cfg.BridgeName,
			Table:          cfg.Table,
			Logger:         d.log.With("subsystem", "dataplane"),
			MACFile:        cfg.BridgeMACFile,
			AdoptLeftovers: true,
			SysctlFamilies: cfg.SysctlFamilies(),
		})
		if err != nil {
			return fmt.Errorf("dataplane: %w", err)
		}
		d.dp = dp
	}

	// 3. Credentials, IPAM and NSP connections.
	d.creds = d.opts.creds
	if d.creds == nil {
		creds, err := credentials.New(ctx, credentials.Config{Insecure: cfg.Insecure, MaxTokenLifetime: cfg.MaxTokenLifetime,
			Logger: d.log})
		if err != nil {
			return fmt.Errorf("credentials: %w", err)
		}
		d.creds = creds
	}
	switch {
	case cfg.Insecure:
		d.background(bg, func(ctx context.Context) {
			plaintext.Warn(ctx, d.log, "NSM_INSECURE", "NSM, the IPAM and the NSP; unsigned NSM tokens", plaintext.Interval)
		})
	case cfg.IPAMInsecure:
		d.background(bg, func(ctx context.Context) {
			plaintext.Warn(ctx, d.log, "NSM_IPAM_INSECURE", "the IPAM and the NSP", plaintext.Interval)
		})
	}
	nsmDial := d.creds.NSMDialOptions()
	if d.opts.nsmDial != nil {
		nsmDial = d.opts.nsmDial
	}
	nsmServer := d.creds.NSMServerOptions()
	if d.opts.nsmServer != nil {
		nsmServer = d.opts.nsmServer
	}
	d.ipamCC, err = d.dialService(cfg.IPAMService)
	if err != nil {
		return fmt.Errorf("IPAM %s: %w", cfg.IPAMService, err)
	}
	d.background(bg, func(ctx context.Context) { d.health.MonitorConn(ctx, d.ipamCC, health.IPAMCli) })
	var vips config.VIPSource
	if cfg.VIPFile != "" {
		vips = config.NewFileSource(cfg.VIPFile, cfg.Trench, d.log.With("subsystem", "vips"))
		d.health.SetServing(health.NSPCli, true)
	} else {
		d.nspCC, err = d.dialService(cfg.NSPAddress())
		if err != nil {
			return fmt.Errorf("NSP %s: %w", cfg.NSPAddress(), err)
		}
		d.background(bg, func(ctx context.Context) { d.health.MonitorConn(ctx, d.nspCC, health.NSPCli) })
		vips = config.NewNSPSource(d.nspCC, cfg.Trench, config.WithLogger(d.log.With("subsystem", "vips")),
			config.WithBackoff(250*time.Millisecond, cfg.GRPCMaxBackoff))
	}

	// 4. The proxy state machine; New waits for the bridge addresses.
	families := proxy.ParseIPFamily(cfg.IPFamily)
	d.log.Info("allocating bridge addresses", "ipam", cfg.IPAMService)
	d.proxy, err = proxy.New(ctx, proxy.Config{
		Conduit: cfg.Conduit, Trench: cfg.Trench, Node: cfg.Host, Families: families,
		IPAM: ipamv1.NewIpamClient(d.ipamCC), Dataplane: d.dp,
		ReleaseDelay: cfg.IPReleaseDelay, BridgeRenewInterval: cfg.BridgeIPRenewInterval,
		Logger: d.log.With("subsystem", "proxy"),
	})
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}

	// 5. Interface monitor fed by the dataplane's link monitor.
	mon := interfacemonitor.New(d.proxy, interfacemonitor.WithLogger(d.log.With("subsystem", "interfacemonitor")))
	events, unsubscribe := d.dp.Subscribe()
	for _, l := range d.dp.Links() {
		mon.HandleLinkEvent(interfacemonitor.LinkEvent{Index: l.Index, Name: l.Name})
	}
	linkEvents := make(chan interfacemonitor.LinkEvent)
	d.background(bg, func(ctx context.Context) {
		defer unsubscribe()
		defer close(linkEvents)
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-events:
				if !ok {
					return
				}
				select {
				case linkEvents <- interfacemonitor.LinkEvent{Index: ev.Index, Name: ev.Name, Deleted: ev.Type == dataplane.LinkDeleted}:
				case <-ctx.Done():
					return
				}
			}
		}
	})
	d.background(bg, func(ctx context.Context) {
		if err := mon.Run(ctx, linkEvents); err != nil && !errors.Is(err, interfacemonitor.ErrSourceClosed) {
			d.log.Error("interface monitor stopped", "error", err)
		}
	})

	// 6. Full mesh toward the load balancers. The NSM client chains (and
	// their refresh and heal goroutines) live until the mesh has closed
	// its connections.
	connectTo := cfg.ConnectTo
	nsmCtx, nsmCancel := context.WithCancel(bg)
	d.nsmCancel = nsmCancel
	pinner := fullmesh.NewPinner()
	d.nsmCC, err = grpc.NewClient(grpcutils.URLToTarget(&connectTo), nsmDial...)
	if err != nil {
		return fmt.Errorf("NSMgr connection monitor %s: %w", connectTo.String(), err)
	}
	monitor := networkservice.NewMonitorConnectionClient(d.nsmCC)
	nsc := client.NewClient(nsmCtx,
		client.WithClientURL(&connectTo),
		client.WithName(cfg.Name),
		client.WithDialOptions(nsmDial...),
		client.WithDialTimeout(cfg.DialTimeout),
		client.WithAuthorizeClient(d.creds.AuthorizeClient()),
		// A heal that starts because the NSMgr went away re-requests as is
		// instead of closing first: the LB ports, nexthops and addresses
		// stay while NSM is away (see pkg/nsm/liveness).
		client.WithHealClient(heal.NewClient(nsmCtx, liveness.HealOptions(monitor, func(c *networkservice.Connection) bool {
			return mon.Lost(proxy.LBConn, c.GetId())
		})...)),
		client.WithAdditionalFunctionality(
			// Heal re-requests an LB that died without unregistering as
			// fast as the failures come back; pause between failed tries
			// so that each one does not renew addresses with the IPAM.
			nsmbackoff.NewClient(),
			kernel.NewClient(),
			interfacemonitor.NewClient(mon),
			ipcontext.NewClient(d.proxy, ipcontext.WithLogger(d.log.With("subsystem", "ipcontext"))),
			mtu.NewClient(mtu.WithMTU(uint32(cfg.MTU))),
			egress.NewClient(func(serving bool) { d.health.SetServing(health.Egress, serving) }),
			pinner,
			sendfd.NewClient(),
		),
	)
	// The full mesh reopens its watch itself and resyncs from a listing
	// when the stream breaks; the SDK's registry heal would reopen it
	// silently and any deletion carried by the break would be lost (with
	// the NSMgr's embedded registry, the Deleted event of an unregistered
	// NSE breaks the stream: its passed socket fd is already closed).
	registry := registryclient.NewNetworkServiceEndpointRegistryClient(nsmCtx,
		registryclient.WithClientURL(&connectTo),
		registryclient.WithDialOptions(nsmDial...),
		registryclient.WithNSEHealClient(registrynull.NewNetworkServiceEndpointRegistryClient()))
	d.mesh = fullmesh.New(cfg.Name, cfg.NetworkServiceName, nsc, registry,
		fullmesh.WithPinner(pinner),
		fullmesh.WithRecovery(monitor),
		fullmesh.WithRequestTimeout(cfg.RequestTimeout),
		fullmesh.WithCloseTimeout(cfg.RequestTimeout),
		fullmesh.WithExpiry(10*time.Second, cfg.MaxTokenLifetime/2),
		fullmesh.WithLogger(d.log.With("subsystem", "fullmesh")),
	)
	d.background(bg, func(ctx context.Context) {
		err := d.mesh.Run(ctx)
		if ctx.Err() == nil {
			d.fail(fmt.Errorf("full mesh stopped: %w", err))
		}
	})

	// 7. The endpoint for the targets.
	d.ep, err = endpoint.Start(ctx, endpoint.Config{
		Name: cfg.Name, Service: cfg.ServiceName, NodeName: cfg.Host, ConnectTo: &connectTo,
		TokenGenerator: d.creds.TokenGenerator(),
		DialOptions:    nsmDial,
		ServerOptions:  nsmServer,
		Elements: []networkservice.NetworkServiceServer{
			keepmech.NewServer(),
			mechanisms.NewServer(map[string]networkservice.NetworkServiceServer{kernelmech.MECHANISM: kernel.NewServer()}),
			interfacemonitor.NewServer(mon),
			ipcontext.NewServer(d.proxy, ipcontext.WithLogger(d.log.With("subsystem", "ipcontext"))),
			mtu.NewServer(mtu.WithMTU(uint32(cfg.MTU))),
		},
	}, endpoint.WithAuthorizeServer(d.creds.AuthorizeServer()), endpoint.WithLogger(d.log.With("subsystem", "endpoint")),
		endpoint.WithRegistrationState(func(ok bool) { d.health.SetServing(health.NSMRegistry, ok) }),
		endpoint.WithListenURL(listenURL(cfg.ListenOn)))
	if err != nil {
		return fmt.Errorf("endpoint: %w", err)
	}
	d.background(bg, func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-d.ep.Done():
			d.fail(fmt.Errorf("endpoint stopped: %w", d.ep.Err()))
		}
	})
	d.background(bg, func(ctx context.Context) { d.probeEndpoint(ctx, nsmDial) })

	// 8. Metrics and the debug socket.
	if err := d.serveObservability(bg); err != nil {
		return err
	}

	// 9. VIPs.
	d.background(bg, func(ctx context.Context) {
		err := vips.Run(ctx, func(p []netip.Prefix) {
			if err := d.proxy.SetVIPs(p); err != nil {
				d.log.Warn("some VIPs were rejected", "error", err)
			}
		})
		if err != nil && ctx.Err() == nil {
			d.log.Error("VIP source stopped", "error", err)
		}
	})
	return nil
}

func listenURL(s string) *url.URL {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return &url.URL{Scheme: "unix", Path: s}
	}
	return u
}

// probeEndpoint checks the endpoint's own health service, as Meridio's
// liveness probe does, and drives the NSMEndpoint subservice.
func (d *Daemon) probeEndpoint(ctx context.Context, dialOpts []grpc.DialOption) {
	cc, err := grpc.NewClient(grpcutils.URLToTarget(d.ep.URL()), dialOpts...)
	if err != nil {
		d.log.Error("endpoint health probe", "error", err)
		return
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, d.cfg.GRPCProbeRPCTimeout)
		resp, err := hc.Check(pctx, &healthpb.HealthCheckRequest{})
		cancel()
		d.health.SetServing(health.NSMEndpoint, err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// dialService dials the IPAM or the NSP with Meridio's connection options.
func (d *Daemon) dialService(target string) (*grpc.ClientConn, error) {
	var tc grpccreds.TransportCredentials = insecure.NewCredentials()
	if d.creds.Secure() && !d.cfg.IPAMInsecure {
		tc = d.creds.ClientTransportCredentials()
	}
	bc := backoff.DefaultConfig
	bc.MaxDelay = d.cfg.GRPCMaxBackoff
	return grpc.NewClient(target,
		grpc.WithTransportCredentials(tc),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc, MinConnectTimeout: d.cfg.DialTimeout}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: d.cfg.GRPCKeepaliveTime, PermitWithoutStream: true}),
	)
}

// Stop tears down in the reverse order: the endpoint is unregistered, the
// LB connections are closed (their interfaces and nexthops go), pending
// address releases are forced, and then the connections and the dataplane
// are closed. The kernel keeps the bridge, its addresses and the VIP rules
// (as Meridio) so that a restarted proxy takes over without a gap. Stop is
// idempotent.
func (d *Daemon) Stop() error {
	d.stopOnce.Do(func() { d.stopErr = d.stop() })
	return d.stopErr
}

func (d *Daemon) stop() error {
	d.stopping.Store(true)
	var errs []error
	if d.ep != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		if err := d.ep.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop endpoint: %w", err))
		}
		cancel()
	}
	// Cancel in reverse start order and wait: the mesh closes its
	// connections before Run returns.
	for i := len(d.cancels) - 1; i >= 0; i-- {
		d.cancels[i]()
	}
	d.wg.Wait()
	if d.nsmCancel != nil {
		d.nsmCancel()
	}
	if d.proxy != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		if err := d.proxy.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close proxy: %w", err))
		}
		cancel()
	}
	for _, cc := range []*grpc.ClientConn{d.nsmCC, d.nspCC, d.ipamCC} {
		if cc != nil {
			_ = cc.Close()
		}
	}
	if d.creds != nil && d.opts.creds == nil {
		_ = d.creds.Close()
	}
	if d.dp != nil {
		if err := d.dp.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close dataplane: %w", err))
		}
	}
	return errors.Join(errs...)
}
