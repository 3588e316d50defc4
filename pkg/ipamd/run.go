package ipamd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/pkg/grpcsecurity"
	"github.com/causeway-net/causeway/pkg/ipam"
)

// Run serves ipam.v1.Ipam and grpc.health.v1 until ctx ends or a server
// fails, then stops and returns. Start order: credentials, then with the
// bbolt store the import of a Meridio database found at the datasource
// (once: it is then a store), store, engine, snapshots (with the Kubernetes
// store the election, whose leader loads the store: startReplica), then gRPC
// server, metrics server, conduit watch. Stop order:
// probes fail, the watch ends, calls in flight get cfg.GracePeriod, the
// metrics server stops, periodic snapshots stop, the engine flushes its
// leases, a last snapshot is taken and the store closes. A damaged store is
// a *daemon.ExitError with ExitStoreDamaged, another application's SQLite
// file one with ExitStoreForeign.
func Run(ctx context.Context, cfg *Config, logger *slog.Logger) (failure error) {
	ecfg, err := cfg.engineConfig()
	if err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	ecfg.Logger = logger
	// Security first: a service that cannot serve must not create or
	// import a store on its way out.
	sec, closeSec, err := grpcsecurity.OpenSecurity(ctx, cfg.security(), logger)
	if err != nil {
		return err
	}
	defer closeSec()
	nodes, err := callerNodes(cfg, sec, logger)
	if err != nil {
		return err
	}
	// "" is the process; ipam.v1.Ipam is NOT_SERVING while store commits
	// fail or, with replicas, while this one does not serve.
	hs := grpchealth.NewServer()
	start := startBolt
	if cfg.Store == StoreKubernetes {
		start = startReplica
	}
	be, err := start(ctx, cfg, ecfg, hs, sec.Client, logger)
	if err != nil {
		return err
	}
	defer be.stop()

	lis, err := net.Listen("tcp", net.JoinHostPort(cfg.ListenAddress, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	stopHealth, err := daemon.ListenHealth(cfg.ListenAddress, cfg.HealthPort, hs, logger)
	if err != nil {
		_ = lis.Close()
		return err
	}
	defer stopHealth()
	rpcMetrics := ipam.NewRPCMetrics()
	gs := grpc.NewServer(append(append([]grpc.ServerOption{
		grpc.UnaryInterceptor(rpcMetrics.UnaryInterceptor()),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: cfg.GRPCKeepaliveTime}),
		daemon.ProxyPings(),
	}, sec.ServerOptions...), nodes.options()...)...)
	ipamv1.RegisterIpamServer(gs, be.server)
	healthpb.RegisterHealthServer(gs, hs)
	serveDone := make(chan error, 1)
	go func() { serveDone <- gs.Serve(lis) }()
	logger.Info("serving", "address", lis.Addr().String())

	metricsDone := make(chan error, 1)
	var metricsSrv *http.Server
	if cfg.MetricsPort > 0 {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), rpcMetrics)
		reg.MustRegister(be.collectors...)
		nodes.register(reg)
		mux := http.NewServeMux()
		mux.Handle("/metrics", ipam.MetricsHandler(reg))
		metricsSrv = &http.Server{Addr: net.JoinHostPort(cfg.ListenAddress, strconv.Itoa(cfg.MetricsPort)), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { metricsDone <- metricsSrv.ListenAndServe() }()
		logger.Info("serving metrics", "address", metricsSrv.Addr)
	}

	wctx, cancelWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	if cfg.NSPService == "" {
		close(watchDone)
		logger.Info("IPAM_NSP_SERVICE is empty: conduits are not followed (only created by Allocate)")
	} else {
		// grpc.NewClient does not connect until used: the IPAM serves even
		// while the configuration server is down; the watcher logs it.
		creds, err := sec.ClientFor(cfg.NSPServerIDs)
		if err != nil {
			cancelWatch()
			gs.Stop()
			return fmt.Errorf("IPAM_NSP_SERVER_IDS: %w", err)
		}
		conn, err := grpc.NewClient(cfg.NSPService,
			grpc.WithTransportCredentials(creds),
			grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: cfg.GRPCKeepaliveTime, PermitWithoutStream: true}),
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
				BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: cfg.GRPCMaxBackoff,
			}}))
		if err != nil {
			cancelWatch()
			gs.Stop()
			return fmt.Errorf("NSP client for %q: %w", cfg.NSPService, err)
		}
		defer conn.Close()
		w := &ipam.ConduitWatcher{
			Client: nspv1.NewConfigurationManagerClient(conn), Trench: cfg.TrenchName,
			Syncer: be.syncer, MaxBackoff: cfg.GRPCMaxBackoff, Logger: logger,
		}
		go func() {
			defer close(watchDone)
			w.Run(wctx)
		}()
	}

	select {
	case <-ctx.Done():
		logger.Info("stopping")
	case err := <-serveDone:
		failure = fmt.Errorf("grpc server: %w", err)
	case err := <-metricsDone:
		failure = fmt.Errorf("metrics server: %w", err)
	}

	// Stop order: probes fail, the watch ends, calls in flight get a grace
	// period, then (deferred) the engine flushes and the store closes.
	hs.Shutdown()
	cancelWatch()
	<-watchDone
	daemon.StopServing(logger, gs, metricsSrv, cfg.GracePeriod)
	return failure
}
