package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
)

func runCmd(args []string) int {
	c := newCmdLine("lab run")
	once := c.Bool("once", false, "tear the lab down after the checks; exit 1 if any failed")
	timeout := c.Duration("timeout", labrun.DefaultSettleTimeout, "how long the checks may take to turn green")
	var opts labrun.Options
	var vips, lbs listFlag
	c.StringVar(&opts.BinDir, "bin", "", "directory of the proxy, ipam, nsp and lab binaries (default: this binary's directory)")
	c.StringVar(&opts.RunBase, "run-base", "", "parent of the run directories (default /run/causeway-lab)")
	c.IntVar(&opts.Targets, "targets", labrun.DefaultTargets, "number of targets")
	c.Var(&vips, "vip", "VIP (repeatable; default "+strings.Join(labrun.DefaultVIPs, ", ")+")")
	c.Var(&lbs, "lb", "LB name (repeatable; default "+strings.Join(labrun.DefaultLBs, ", ")+")")
	c.DurationVar(&opts.ReleaseDelay, "release-delay", labrun.DefaultReleaseDelay, "the proxy's NSM_IP_RELEASE_DELAY")
	c.DurationVar(&opts.NSEExpiration, "nse-expiration", labrun.DefaultNSEExpiration, "NSE registration expiration")
	c.DurationVar(&opts.TokenLifetime, "token-lifetime", controlplane.DefaultTokenLifetime, "lifetime of the NSM tokens (control plane, targets, the proxy's NSM_MAX_TOKEN_LIFETIME); connections refresh at a third of it")
	c.StringVar(&opts.LogLevel, "log-level", labrun.DefaultLogLevel, "log level of the proxy, ipam and nsp")
	c.StringVar(&opts.ServiceProvider, "service-provider", "nftables", "the proxy's service load balancer provider: nftables or userspace")
	c.BoolVar(&opts.NoServices, "no-services", false, "run the lab without services")
	if _, code, ok := c.parse(args); !ok {
		return code
	}
	if len(vips) > 0 {
		opts.VIPs = vips
	}
	if len(lbs) > 0 {
		opts.LBs = lbs
	}
	opts.Stdout = stdout
	// Its warnings (a component that ended by itself, one killed after its
	// grace) on stderr, as they happen.
	opts.Logger = slog.Default()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	lab, err := labrun.Up(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "lab: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "lab %s: up in %.1fs; checking\n", lab.ID(), time.Since(start).Seconds())
	rep, err := lab.WaitGreen(ctx, *timeout, stdout)
	rep.Print(stdout)
	green := err == nil
	if green {
		fmt.Fprintf(stdout, "lab %s: all checks green %.1fs after start\n", lab.ID(), time.Since(start).Seconds())
	} else {
		fmt.Fprintf(stdout, "lab %s: %v (%.1fs after start; logs in %s)\n", lab.ID(), err, time.Since(start).Seconds(), lab.LogDir())
	}
	if !*once && ctx.Err() == nil {
		fmt.Fprintf(stdout, "lab %s: up; `lab status`, `lab check` and `lab down` from another terminal; Ctrl-C tears it down\n", lab.ID())
		<-ctx.Done()
	}
	fmt.Fprintf(stdout, "lab %s: tearing down\n", lab.ID())
	if err := lab.Down(); err != nil {
		fmt.Fprintf(stderr, "lab: down: %v (logs in %s)\n", err, lab.LogDir())
		return 1
	}
	fmt.Fprintf(stdout, "lab %s: down; logs in %s\n", lab.ID(), lab.LogDir())
	if !green {
		return 1
	}
	return 0
}
