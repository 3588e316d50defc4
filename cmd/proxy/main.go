// Command proxy is Causeway's per-node proxy: the NSM endpoint of a
// conduit's targets, the full-mesh client of its load balancers and the
// owner of the bridge, routes and VIP rules that join them. Configuration
// comes from NSM_* environment variables (see the README); the work is done
// by pkg/proxyd. "proxy -debug" prints the running proxy's state. SIGUSR2
// switches the log level to TRACE, SIGUSR1 back to NSM_LOG_LEVEL.
package main

import (
	"context"
	"log/slog"
	"os"
	"syscall"

	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/pkg/proxyd"
)

var version = "dev"

func main() {
	proxyd.Version = version
	os.Exit(daemon.Main(daemon.Service[*proxyd.Config]{
		Name:     "proxy",
		Version:  version,
		Env:      "NSM_*",
		Load:     proxyd.Load,
		LogLevel: func(c *proxyd.Config) string { return c.LogLevel },
		Run: func(ctx context.Context, cfg *proxyd.Config, logger *slog.Logger) error {
			return proxyd.Run(ctx, cfg, logger)
		},
		Modes: []daemon.Mode[*proxyd.Config]{{Flag: "debug",
			Usage: "print the running proxy's state (model and kernel) as JSON and exit", Run: proxyd.Debug},
			proxyd.ProbeMode()},
		StopSignals:  []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT},
		LevelSignals: true,
		// The proxy's live heap is small and, once its targets are up,
		// it allocates little (refreshes): a collection at 1.5× the live
		// heap instead of 2× keeps the pod's memory down at no measurable
		// CPU cost (docs/proxy-memory.md). GOGC overrides it.
		GCPercent: 50,
	}, os.Args[1:], os.Stdout, os.Stderr))
}
