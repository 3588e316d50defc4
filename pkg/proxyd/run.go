package proxyd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/client"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/heal"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/sendfd"
	registryclient "github.com/networkservicemesh/sdk/pkg/registry/chains/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/pkg/config"
	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/health"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
	"github.com/causeway-net/causeway/pkg/nsm/egress"
	"github.com/causeway-net/causeway/pkg/nsm/endpoint"
	"github.com/causeway-net/causeway/pkg/nsm/fullmesh"
	"github.com/causeway-net/causeway/pkg/nsm/interfacemonitor"
	"github.com/causeway-net/causeway/pkg/nsm/ipcontext"
	"github.com/causeway-net/causeway/pkg/nsm/mtu"
	"github.com/causeway-net/causeway/pkg/nsm/nsmlog"
	"github.com/causeway-net/causeway/pkg/proxy"
)

// Daemon is a running proxy. Run builds it; Stop tears it down in the
// reverse order of start-up.
type daemon struct {
	cfg    *Config
	log    *slog.Logger
	health *health.Checker
	creds  *credentials.Credentials
	dp     *dataplane.Dataplane
	ipamCC *grpc.ClientConn
	nspCC  *grpc.ClientConn
	proxy  *proxy.Proxy
	ep     *endpoint.Endpoint

	wg      sync.WaitGroup // background goroutines, stopped by cancel
	cancels []context.CancelFunc
	mesh    chan error // the full mesh's Run result
}

// Run starts the proxy and blocks until ctx ends or a vital component
// fails, then shuts down and returns. The start-up order follows Meridio's
// proxy: health, dataplane and link monitor, IPAM and NSP connections, the
// proxy state machine (which waits for its bridge addresses), the full mesh
// toward the load balancers, the endpoint for the targets, and the VIPs.
func Run(ctx context.Context, cfg *Config, log *slog.Logger) (err error) {
	nsmlog.Install(log)
	d := &daemon{cfg: cfg, log: log}
	defer func() {
		stopErr := d.stop()
		if err == nil {
			err = stopErr
		}
	}()
	if err := d.start(ctx); err != nil {
		return err
	}
	log.Info("proxy started", "name", cfg.Name, "service", cfg.ServiceName, "lbService", cfg.NetworkServiceName,
		"conduit", cfg.Conduit, "trench", cfg.Trench, "node", cfg.Host)
	select {
	case <-ctx.Done():
		log.Info("stopping on signal")
		return nil
	case err := <-d.mesh:
		return fmt.Errorf("full mesh stopped: %w", err)
	case <-d.ep.Done():
		return fmt.Errorf("endpoint stopped: %w", d.ep.Err())
	}
}

func (d *daemon) background(ctx context.Context, fn func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	d.cancels = append(d.cancels, cancel)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		fn(ctx)
	}()
}

func (d *daemon) start(ctx context.Context) error {
	cfg := d.cfg
	// Background work lives until stop, not until ctx: stop needs it to
	// shut down in order.
	bg := context.WithoutCancel(ctx)

	// 1. Health.
	d.health = health.New(health.WithLogger(d.log))
	d.health.Register(health.Readiness, health.IPAMCli, health.NSPCli, health.NSMEndpoint, health.Egress)
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
	d.dp, err = dataplane.New(ctx, dataplane.Options{
		BridgeName:     cfg.BridgeName,
		Table:          cfg.Table,
		Logger:         d.log.With("subsystem", "dataplane"),
		MACFile:        cfg.BridgeMACFile,
		AdoptLeftovers: true,
	})
	if err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}

	// 3. Credentials, IPAM and NSP connections.
	d.creds, err = credentials.New(ctx, credentials.Config{Insecure: cfg.Insecure, MaxTokenLifetime: cfg.MaxTokenLifetime,
		Logger: d.log})
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
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

	// 6. Full mesh toward the load balancers.
	connectTo := cfg.ConnectTo
	pinner := fullmesh.NewPinner()
	nsc := client.NewClient(bg,
		client.WithClientURL(&connectTo),
		client.WithName(cfg.Name),
		client.WithDialOptions(d.creds.NSMDialOptions()...),
		client.WithDialTimeout(cfg.DialTimeout),
		client.WithAuthorizeClient(d.creds.AuthorizeClient()),
		client.WithHealClient(heal.NewClient(bg)),
		client.WithAdditionalFunctionality(
			kernel.NewClient(),
			interfacemonitor.NewClient(mon),
			ipcontext.NewClient(d.proxy, ipcontext.WithLogger(d.log.With("subsystem", "ipcontext"))),
			mtu.NewClient(mtu.WithMTU(uint32(cfg.MTU))),
			egress.NewClient(func(serving bool) { d.health.SetServing(health.Egress, serving) }),
			pinner,
			sendfd.NewClient(),
		),
	)
	registry := registryclient.NewNetworkServiceEndpointRegistryClient(bg,
		registryclient.WithClientURL(&connectTo),
		registryclient.WithDialOptions(d.creds.NSMDialOptions()...))
	mesh := fullmesh.New(cfg.Name, cfg.NetworkServiceName, nsc, registry,
		fullmesh.WithPinner(pinner),
		fullmesh.WithRequestTimeout(cfg.RequestTimeout),
		fullmesh.WithCloseTimeout(cfg.RequestTimeout),
		fullmesh.WithExpiry(10*time.Second, cfg.MaxTokenLifetime/2),
		fullmesh.WithLogger(d.log.With("subsystem", "fullmesh")),
	)
	d.mesh = make(chan error, 1)
	d.background(bg, func(ctx context.Context) { d.mesh <- mesh.Run(ctx) })

	// 7. The endpoint for the targets.
	d.ep, err = endpoint.Start(ctx, endpoint.Config{
		Name: cfg.Name, Service: cfg.ServiceName, NodeName: cfg.Host, ConnectTo: &connectTo,
		TokenGenerator: d.creds.TokenGenerator(),
		DialOptions:    d.creds.NSMDialOptions(),
		ServerOptions:  d.creds.NSMServerOptions(),
		Elements: []networkservice.NetworkServiceServer{
			mechanisms.NewServer(map[string]networkservice.NetworkServiceServer{kernelmech.MECHANISM: kernel.NewServer()}),
			interfacemonitor.NewServer(mon),
			ipcontext.NewServer(d.proxy, ipcontext.WithLogger(d.log.With("subsystem", "ipcontext"))),
			mtu.NewServer(mtu.WithMTU(uint32(cfg.MTU))),
		},
	}, endpoint.WithAuthorizeServer(d.creds.AuthorizeServer()), endpoint.WithLogger(d.log.With("subsystem", "endpoint")),
		endpoint.WithListenURL(listenURL(cfg.ListenOn)))
	if err != nil {
		return fmt.Errorf("endpoint: %w", err)
	}
	d.background(bg, d.probeEndpoint)

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
		if err != nil {
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
func (d *daemon) probeEndpoint(ctx context.Context) {
	u := d.ep.URL()
	cc, err := grpc.NewClient(u.Scheme+"://"+u.Path, d.creds.NSMDialOptions()...)
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
func (d *daemon) dialService(target string) (*grpc.ClientConn, error) {
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

// stop tears down in the reverse order: the endpoint is unregistered, the
// LB connections are closed (their interfaces and nexthops go), pending
// address releases are forced, and then the connections and the dataplane
// are closed. The kernel keeps the bridge, its addresses and the VIP rules
// (as Meridio) so that a restarted proxy takes over without a gap.
func (d *daemon) stop() error {
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
	if d.proxy != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		if err := d.proxy.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close proxy: %w", err))
		}
		cancel()
	}
	for _, cc := range []*grpc.ClientConn{d.nspCC, d.ipamCC} {
		if cc != nil {
			_ = cc.Close()
		}
	}
	if d.creds != nil {
		_ = d.creds.Close()
	}
	if d.dp != nil {
		if err := d.dp.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close dataplane: %w", err))
		}
	}
	return errors.Join(errs...)
}
