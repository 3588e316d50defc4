package proxyd

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/insecurewarning"
	"github.com/causeway-net/causeway/internal/tasks"
	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/health"
	"github.com/causeway-net/causeway/pkg/nsm/chain/connlink"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
	"github.com/causeway-net/causeway/pkg/nspwatch"
	"github.com/causeway-net/causeway/pkg/proxy"
	"github.com/causeway-net/causeway/pkg/proxyd/vipsource"
	"github.com/causeway-net/causeway/pkg/servicelb"
)

// components are the daemon's parts in their start order, which follows
// Meridio's proxy; they stop in the reverse order. The NSM ones are in
// nsm.go, the observability ones in observe.go.
func (d *Daemon) components() []component {
	return []component{
		{"health", d.startHealth},
		{"dataplane", d.startDataplane},
		{"credentials", d.startCredentials},
		{"IPAM client", d.startIPAMClient},
		{"VIP source", d.startVIPSource},
		{"proxy", d.startProxy},
		{"nexthop check", d.startNexthopCheck},
		{"services", d.startServices},
		{"link matcher", d.startLinkMatcher},
		{"NSM client", d.startNSMClient},
		{"full mesh", d.startFullMesh},
		{"endpoint", d.startEndpoint},
		{"endpoint probe", d.startEndpointProbe},
		{"metrics", d.startMetrics},
		{"debug socket", d.startDebugSocket},
		{"VIPs", d.startVIPs},
		{"leftovers", d.startLeftoverRelease},
	}
}

// probeSubservices are the subservices of each probe (the proxy's -probe
// names those that fail).
var probeSubservices = map[string][]string{
	health.Readiness: {health.IPAMCli, health.NSPCli, health.NSMEndpoint, health.Egress, health.NSMRegistry},
	health.Liveness:  {health.NSMEndpoint},
}

// probeWarnings are the warnings of each probe: reported in its answers,
// never a reason to fail it.
var probeWarnings = map[string][]string{
	health.Readiness: {health.Datapath},
}

// startHealth serves the gRPC health service on the health socket.
func (d *Daemon) startHealth(ctx context.Context) (func() error, error) {
	d.health = health.New(health.WithLogger(d.log))
	for probe, subservices := range probeSubservices {
		d.health.Register(probe, subservices...)
	}
	for probe, subservices := range probeWarnings {
		d.health.RegisterWarning(probe, subservices...)
	}
	lis, err := health.ListenUnix(d.cfg.HealthSocket)
	if err != nil {
		return nil, fmt.Errorf("socket %s: %w", d.cfg.HealthSocket, err)
	}
	t := tasks.New(ctx)
	t.Go(func(ctx context.Context) {
		if err := d.health.Serve(ctx, lis); err != nil {
			d.log.Error("health server stopped", "error", err)
		}
	})
	return t.Stop, nil
}

// guardedPorts are the ports of the proxy's own TCP listeners that no
// target may reach over the bridge: the metrics' (which name the conduit's
// nodes, Services and targets). Validate has checked the address.
func (d *Daemon) guardedPorts() []uint16 {
	if port, _ := d.cfg.MetricsPort(); port != 0 {
		return []uint16{port}
	}
	return nil
}

// startDataplane creates the bridge, sysctls, table and link table (or
// takes the one WithDataplane gave). Its stop closes it; the kernel keeps
// the bridge, its addresses and the VIP rules.
func (d *Daemon) startDataplane(ctx context.Context) (func() error, error) {
	d.dp = d.opts.dataplane
	if d.dp == nil {
		dp, err := dataplane.New(ctx, dataplane.Options{
			BridgeName:     d.cfg.BridgeName,
			Table:          d.cfg.Table,
			Logger:         d.log.With("subsystem", "dataplane"),
			MACFile:        d.cfg.BridgeMACFile,
			AdoptLeftovers: true,
			HoldLeftovers:  true,
			SysctlFamilies: d.cfg.SysctlFamilies(),
			// The nftables service provider's clients and endpoints are
			// ports of the bridge (docs/servicelb.md).
			BridgeNetfilter: d.cfg.ServicesOn() && d.cfg.ServiceProvider == servicelb.ProviderNftables,
			EchoSockets:     !d.cfg.NexthopCheckOff,
			GuardedPorts:    d.guardedPorts(),
		})
		if err != nil {
			return nil, err
		}
		d.dp = dp
	}
	return d.dp.Close, nil
}

// startCredentials sets up the NSM tokens and the gRPC options (or takes
// the ones WithCredentials gave; those the caller closes).
func (d *Daemon) startCredentials(ctx context.Context) (func() error, error) {
	stop := noStop
	d.creds = d.opts.creds
	if d.creds == nil {
		// Node: with per-node IDs the IPAM holds the proxy to the node its
		// SVID names; another SVID of the pod would name none.
		creds, err := credentials.New(ctx, credentials.Config{Insecure: d.cfg.Insecure, MaxTokenLifetime: d.cfg.MaxTokenLifetime,
			Logger: d.log, Node: d.cfg.Host})
		if err != nil {
			return nil, err
		}
		d.creds = creds
		stop = func() error { _ = creds.Close(); return nil }
	}
	d.nsmDial = d.creds.NSMDialOptions()
	if d.opts.nsmDial != nil {
		d.nsmDial = d.opts.nsmDial
	}
	d.nsmServer = d.creds.NSMServerOptions()
	if d.opts.nsmServer != nil {
		d.nsmServer = d.opts.nsmServer
	}
	return d.warnPlaintext(ctx, stop), nil
}

// warnPlaintext warns at start and every hour while plain gRPC is in use,
// as asked by NSM_INSECURE or NSM_IPAM_INSECURE; the returned stop ends
// the warnings, then runs next.
func (d *Daemon) warnPlaintext(ctx context.Context, next func() error) func() error {
	variable, what := "", ""
	switch {
	case d.cfg.Insecure:
		variable, what = "NSM_INSECURE", "NSM, the IPAM and the NSP; unsigned NSM tokens"
	case d.cfg.IPAMInsecure:
		variable, what = "NSM_IPAM_INSECURE", "the IPAM and the NSP"
	default:
		return next
	}
	t := tasks.New(ctx)
	t.Go(func(ctx context.Context) { insecurewarning.Warn(ctx, d.log, variable, what, insecurewarning.Interval) })
	return func() error {
		_ = t.Stop()
		return next()
	}
}

// startIPAMClient dials the IPAM and follows its connection's health.
func (d *Daemon) startIPAMClient(ctx context.Context) (func() error, error) {
	cc, err := d.dialService(d.cfg.IPAMService, d.cfg.IPAMServerIDs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.cfg.IPAMService, err)
	}
	d.ipamCC = cc
	return d.monitorConn(ctx, cc, health.IPAMCli), nil
}

// startVIPSource prepares where the VIPs come from: the watched file of
// NSM_VIP_FILE, or else the NSP (dialed here, watched by the VIPs
// component).
func (d *Daemon) startVIPSource(ctx context.Context) (func() error, error) {
	log := d.log.With("subsystem", "vips")
	if d.cfg.VIPFile != "" {
		d.vips = vipsource.NewFileSource(d.cfg.VIPFile, d.cfg.Trench, log)
		d.health.SetServing(health.NSPCli, true)
		return noStop, nil
	}
	cc, err := d.dialService(d.cfg.NSPAddress(), d.cfg.NSPServerIDs)
	if err != nil {
		return nil, fmt.Errorf("NSP %s: %w", d.cfg.NSPAddress(), err)
	}
	d.vips = vipsource.NewNSPSource(cc, d.cfg.Trench, nspwatch.WithLogger(log),
		nspwatch.WithBackoff(250*time.Millisecond, d.cfg.GRPCMaxBackoff))
	return d.monitorConn(ctx, cc, health.NSPCli), nil
}

// monitorConn drives a subservice from the state of cc; the returned stop
// ends that and closes cc.
func (d *Daemon) monitorConn(ctx context.Context, cc *grpc.ClientConn, sub string) func() error {
	t := tasks.New(ctx)
	t.Go(func(ctx context.Context) { d.health.ReportConnState(ctx, cc, sub) })
	return func() error {
		_ = t.Stop()
		_ = cc.Close()
		return nil
	}
}

// startProxy starts the proxy state machine; it returns once the bridge
// has its addresses. Its stop forces the pending address releases.
func (d *Daemon) startProxy(ctx context.Context) (func() error, error) {
	d.log.Info("allocating bridge addresses", "ipam", d.cfg.IPAMService)
	vips, err := d.cfg.VIPPolicy()
	if err != nil {
		return nil, err
	}
	ids, err := d.targetIdentity()
	if err != nil {
		return nil, err
	}
	p, err := proxy.New(ctx, proxy.Config{
		Conduit: d.cfg.Conduit, Trench: d.cfg.Trench, Node: d.cfg.Host, Families: proxy.ParseIPFamily(d.cfg.IPFamily),
		IPAM: ipamv1.NewIpamClient(d.ipamCC), Dataplane: d.dp,
		ReleaseDelay: d.cfg.IPReleaseDelay, BridgeRenewInterval: d.cfg.BridgeIPRenewInterval,
		PortFilterOff: d.cfg.PortFilterOff, VIPs: vips, MaxConnectionsPerClient: d.cfg.MaxConnectionsPerClient,
		TargetIdentity: ids, Logger: d.log.With("subsystem", "proxy"),
	})
	if err != nil {
		return nil, err
	}
	d.proxy = p
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		return p.Close(ctx)
	}, nil
}

// startLinkMatcher starts the link matcher on the dataplane's
// link table: it reads it and follows its events, with no table or
// goroutine of its own between the two.
func (d *Daemon) startLinkMatcher(ctx context.Context) (func() error, error) {
	d.links = connlink.New(d.proxy, d.dp, connlink.WithLogger(d.log.With("subsystem", "connlink")))
	events, unsubscribe := d.dp.Subscribe()
	t := tasks.New(ctx)
	t.Go(func(ctx context.Context) {
		defer unsubscribe()
		if err := d.links.Run(ctx, events); err != nil && !errors.Is(err, connlink.ErrSourceClosed) {
			d.log.Error("link matcher stopped", "error", err)
		}
	})
	return t.Stop, nil
}

// startVIPs hands the VIPs of the source to the proxy until stop.
func (d *Daemon) startVIPs(ctx context.Context) (func() error, error) {
	t := tasks.New(ctx)
	t.Go(func(ctx context.Context) {
		err := d.vips.Run(ctx, func(p []netip.Prefix) {
			if err := d.proxy.SetVIPs(p); err != nil {
				d.log.Warn("some VIPs were rejected", "error", err)
			}
			d.vipsKnown.happened()
		})
		if err != nil && ctx.Err() == nil {
			d.log.Error("VIP source stopped", "error", err)
		}
	})
	return t.Stop, nil
}

// dialService dials the IPAM or the NSP with Meridio's connection options.
// The server must have an ID of serverIDs (empty: any of the trust domain).
func (d *Daemon) dialService(target string, serverIDs []string) (*grpc.ClientConn, error) {
	var tc grpccreds.TransportCredentials = insecure.NewCredentials()
	if d.creds.Secure() && !d.cfg.IPAMInsecure {
		var err error
		if tc, err = d.creds.ClientTransportCredentialsFor(serverIDs); err != nil {
			return nil, err
		}
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
