// Command nsp is Causeway's configuration server: it serves the nsp.v1
// ConfigurationManager API (WatchVip, WatchConduit) from a YAML file that it
// follows for changes. It refuses to start on a missing or invalid file; a
// later broken edit is logged and the last good configuration keeps being
// served.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/kelseyhightower/envconfig"
	"google.golang.org/grpc"
	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/logging"
	"github.com/causeway-net/causeway/pkg/config/file"
	"github.com/causeway-net/causeway/pkg/config/nspserver"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
)

var version = "dev"

// Config is read from NSP_* environment variables.
type Config struct {
	Port               int           `default:"7778" desc:"gRPC port of the ConfigurationManager and grpc.health.v1 services (0 picks a free port)"`
	ConfigFile         string        `default:"/etc/causeway/nsp.yaml" split_words:"true" desc:"YAML file with trenches, conduits and VIPs"`
	ConfigPollInterval time.Duration `default:"10s" split_words:"true" desc:"period of the re-read that backs up file-system notifications"`
	LogLevel           string        `default:"DEBUG" split_words:"true" desc:"TRACE, DEBUG, INFO, WARN or ERROR"`
	MetricsPort        int           `default:"0" split_words:"true" desc:"port of the Prometheus /metrics endpoint; 0 disables it"`
	GracePeriod        time.Duration `default:"5s" split_words:"true" desc:"how long a stop waits for calls in flight"`
}

// LogValue renders the configuration in a log line, durations as text.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int("port", c.Port),
		slog.String("configFile", c.ConfigFile),
		slog.String("configPollInterval", c.ConfigPollInterval.String()),
		slog.String("logLevel", c.LogLevel),
		slog.Int("metricsPort", c.MetricsPort),
		slog.String("gracePeriod", c.GracePeriod.String()),
	)
}

func main() {
	os.Exit(run())
}

func run() int {
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return 0
	}
	var cfg Config
	if err := envconfig.Process("nsp", &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "nsp: configuration: %v\n", err)
		return 2
	}
	level, err := logging.ParseLevel(cfg.LogLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsp: NSP_LOG_LEVEL: %v\n", err)
		return 2
	}
	logger, _ := logging.New(os.Stderr, "nsp", level)
	logger.Info("starting", "version", version, "config", cfg)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, logger); err != nil {
		logger.Error("nsp failed", "error", err)
		return 1
	}
	logger.Info("stopped")
	return 0
}

func serve(ctx context.Context, cfg Config, logger *slog.Logger) error {
	initial, err := file.Load(cfg.ConfigFile)
	if err != nil {
		return fmt.Errorf("initial configuration (fix the file; nothing is served without one): %w", err)
	}
	creds, closeCreds, err := serverCredentials(ctx, logger)
	if err != nil {
		return err
	}
	defer closeCreds()
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
	gs := grpc.NewServer(
		grpc.Creds(creds),
		// Meridio's proxy pings every NSM_GRPC_KEEPALIVE_TIME (30s); the
		// default policy (5 min) would drop it for "too many pings".
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	)
	nspv1.RegisterConfigurationManagerServer(gs, nsp)
	hs := grpchealth.NewServer()
	hs.SetServingStatus(nspv1.ConfigurationManager_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	m := newMetrics(nsp)

	errc := make(chan error, 3) // one per goroutine below
	wctx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	go func() {
		err := file.Watch(wctx, cfg.ConfigFile, initial, func(c *file.Config) {
			nsp.SetConfig(c)
			m.applied.Inc()
		}, file.WithLogger(logger), file.WithPollInterval(cfg.ConfigPollInterval),
			file.WithRejectHook(func(error) { m.rejected.Inc() }))
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
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(cfg.GracePeriod):
		logger.Warn("grace period over; stopping the gRPC server")
		gs.Stop()
		<-stopped
	}
	if metricsSrv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.GracePeriod)
		defer cancel()
		_ = metricsSrv.Shutdown(sctx)
	}
	return failure
}

// serverCredentials returns SPIFFE mTLS (any SPIFFE ID authorized, as the
// proxy and Meridio's NSP expect) when SPIFFE_ENDPOINT_SOCKET is set, and
// plain text otherwise.
func serverCredentials(ctx context.Context, logger *slog.Logger) (grpccreds.TransportCredentials, func(), error) {
	if os.Getenv("SPIFFE_ENDPOINT_SOCKET") == "" {
		logger.Warn("SPIFFE_ENDPOINT_SOCKET is not set: serving without TLS")
		return insecure.NewCredentials(), func() {}, nil
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, err := credentials.FromWorkloadAPI(sctx, 0)
	if err != nil {
		return nil, nil, err
	}
	logger.Info("using SPIFFE mTLS")
	return c.ServerTransportCredentials(), func() { _ = c.Close() }, nil
}
