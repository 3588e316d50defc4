// Command proxy is Causeway's per-node proxy: the NSM endpoint of a
// conduit's targets, the full-mesh client of its load balancers and the
// owner of the bridge, routes and VIP rules that join them. Configuration
// comes from NSM_* environment variables (see the README); the work is done
// by pkg/proxyd.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/causeway-net/causeway/internal/logging"
	"github.com/causeway-net/causeway/pkg/health"
	"github.com/causeway-net/causeway/pkg/proxyd"
)

var version = "dev"

func main() {
	os.Exit(run())
}

func run() int {
	showVersion := flag.Bool("version", false, "print the version and exit")
	debug := flag.Bool("debug", false, "print the running proxy's state (model and kernel) as JSON and exit")
	probe := flag.String("probe", "", "ask the running proxy's health socket for the probe `kind` (startup, readiness or liveness); exit 0 only if it is serving (a Kubernetes exec probe)")
	probeTimeout := flag.Duration("probe-timeout", 2*time.Second, "how long -probe waits for an answer")
	flag.Parse()
	proxyd.Version = version
	if *showVersion {
		fmt.Println(version)
		return 0
	}
	cfg, err := proxyd.Load()
	if err != nil {
		fmt.Fprintf(os.Stderr, "proxy: invalid configuration:\n%v\n", err)
		return 2
	}
	if *probe != "" {
		if _, err := health.ProbeService(*probe); err != nil {
			fmt.Fprintf(os.Stderr, "proxy: -probe: %v\n", err)
			return 2
		}
		ctx, cancel := context.WithTimeout(context.Background(), *probeTimeout)
		defer cancel()
		if err := health.Probe(ctx, cfg.HealthSocket, *probe); err != nil {
			fmt.Fprintf(os.Stderr, "proxy: %v\n", err)
			return 1
		}
		return 0
	}
	if *debug {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := proxyd.PrintDebug(ctx, cfg.DebugSocket, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "proxy: %v\n", err)
			return 1
		}
		return 0
	}
	level, _ := logging.ParseLevel(cfg.LogLevel) // validated by Load
	logger, levelVar := logging.New(os.Stderr, "proxy", level)
	slog.SetDefault(logger)
	logger.Info("starting", "version", version)

	// SIGUSR2 switches to TRACE, SIGUSR1 restores the configured level.
	levels := make(chan os.Signal, 1)
	signal.Notify(levels, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(levels)
	go func() {
		for s := range levels {
			if s == syscall.SIGUSR2 {
				levelVar.Set(logging.LevelTrace)
			} else {
				levelVar.Set(level)
			}
			logger.Info("log level changed", "level", levelVar.Level().String())
		}
	}()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer stop()
	if err := proxyd.Run(ctx, cfg, logger); err != nil {
		logger.Error("proxy failed", "error", err)
		return 1
	}
	logger.Info("stopped")
	return 0
}
