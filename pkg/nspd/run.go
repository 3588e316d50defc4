package nspd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/internal/yamlfile"
	"github.com/causeway-net/causeway/pkg/grpcsecurity"
	"github.com/causeway-net/causeway/pkg/nspd/configfile"
	"github.com/causeway-net/causeway/pkg/nspd/nspserver"
)

// Run serves the configuration file over nsp.v1.ConfigurationManager and
// grpc.health.v1 until ctx ends or a component fails, then stops and
// returns. It refuses to start on a missing or invalid file; a later broken
// edit is logged and the last good configuration keeps being served. Stop
// order: probes fail, watch streams and the file watch end, calls in flight
// get cfg.GracePeriod, then the metrics server stops.
func Run(ctx context.Context, cfg *Config, logger *slog.Logger) error {
	initial, err := configfile.Load(cfg.ConfigFile)
	if err != nil {
		return fmt.Errorf("initial configuration (fix the file; nothing is served without one): %w", err)
	}
	sec, closeSec, err := grpcsecurity.OpenSecurity(ctx, cfg.security(), logger)
	if err != nil {
		return err
	}
	defer closeSec()
	lis, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	var mlis net.Listener
	if cfg.MetricsPort > 0 {
		if mlis, err = net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(cfg.MetricsPort))); err != nil {
			_ = lis.Close()
			return fmt.Errorf("metrics listen: %w", err)
		}
	}

	nsp := nspserver.New(logger)
	nsp.SetConfig(initial)
	logger.Info("configuration loaded", "path", cfg.ConfigFile,
		"trenches", len(initial.Trenches), "conduits", len(initial.Conduits), "vips", len(initial.VIPs))
	gs := grpc.NewServer(append([]grpc.ServerOption{daemon.ProxyPings()}, sec.ServerOptions...)...)
	nspv1.RegisterConfigurationManagerServer(gs, nsp)
	hs := grpchealth.NewServer()
	hs.SetServingStatus(nspv1.ConfigurationManager_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	stopHealth, err := daemon.ListenHealth("", cfg.HealthPort, hs, logger)
	if err != nil {
		_ = lis.Close()
		if mlis != nil {
			_ = mlis.Close()
		}
		return err
	}
	defer stopHealth()
	m := newMetrics(nsp)

	errc := make(chan error, 3) // one per goroutine below
	wctx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	go func() {
		err := configfile.Watch(wctx, cfg.ConfigFile, initial, func(c *configfile.Config) {
			nsp.SetConfig(c)
			m.applied.Inc()
		}, yamlfile.WithLogger(logger), yamlfile.WithPollInterval(cfg.ConfigPollInterval),
			yamlfile.WithRejectHook(func(error) { m.rejected.Inc() }))
		if err != nil {
			errc <- fmt.Errorf("config watch: %w", err)
		}
	}()
	go func() {
		if err := gs.Serve(lis); err != nil {
			errc <- fmt.Errorf("grpc server: %w", err)
		}
	}()
	logger.Info("serving", "address", lis.Addr().String())
	var metricsSrv *http.Server
	if mlis != nil {
		metricsSrv = &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := metricsSrv.Serve(mlis); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("metrics server: %w", err)
			}
		}()
		logger.Info("serving metrics", "address", mlis.Addr().String())
	}

	var failure error
	select {
	case <-ctx.Done():
		logger.Info("stopping")
	case failure = <-errc:
	}

	// Stop order: probes fail, watches end, calls in flight get a grace
	// period, then everything is cut.
	hs.Shutdown()
	nsp.Close()
	cancelWatch()
	daemon.StopServing(logger, gs, metricsSrv, cfg.GracePeriod)
	return failure
}
