// Command ipam is Causeway's IPAM service: ipam.v1.Ipam over gRPC, backed by
// the pkg/ipam engine and a bbolt database, following the conduits of the
// configuration server when one is configured. Configuration comes from
// IPAM_* environment variables (see the README); the work is done by
// pkg/ipamd.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/causeway-net/causeway/internal/logging"
	"github.com/causeway-net/causeway/pkg/ipamd"
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
	cfg, err := ipamd.Load()
	if err != nil {
		fmt.Fprintf(os.Stderr, "ipam: %v\n", err)
		return 2
	}
	level, _ := logging.ParseLevel(cfg.LogLevel) // validated by Load
	logger, _ := logging.New(os.Stderr, "ipam", level)
	logger.Info("starting", "version", version, "config", cfg)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := ipamd.Run(ctx, cfg, logger); err != nil {
		logger.Error("ipam failed", "error", err)
		return 1
	}
	logger.Info("stopped")
	return 0
}
