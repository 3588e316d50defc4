// Command nsp is Causeway's configuration server: it serves the nsp.v1
// ConfigurationManager API (WatchVip, WatchConduit) from a YAML file that it
// follows for changes. It refuses to start on a missing or invalid file; a
// later broken edit is logged and the last good configuration keeps being
// served. Configuration comes from NSP_* environment variables; the work is
// done by pkg/nspd.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/causeway-net/causeway/internal/logging"
	"github.com/causeway-net/causeway/pkg/nspd"
)

var version = "dev"

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
	cfg, err := nspd.Load()
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsp: %v\n", err)
		return 2
	}
	level, _ := logging.ParseLevel(cfg.LogLevel) // validated by Load
	logger, _ := logging.New(os.Stderr, "nsp", level)
	logger.Info("starting", "version", version, "config", cfg)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := nspd.Run(ctx, cfg, logger); err != nil {
		logger.Error("nsp failed", "error", err)
		return 1
	}
	logger.Info("stopped")
	return 0
}
