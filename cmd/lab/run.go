package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
	"github.com/causeway-net/causeway/pkg/lab/nsmcp"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func runCmd(args []string) int {
	fs := flag.NewFlagSet("lab run", flag.ExitOnError)
	once := fs.Bool("once", false, "tear the lab down after the checks; exit 1 if any failed")
	timeout := fs.Duration("timeout", 3*time.Minute, "how long the checks may take to turn green")
	var opts labrun.Options
	var vips, lbs listFlag
	fs.StringVar(&opts.BinDir, "bin", "", "directory of the proxy, ipam, nsp and lab binaries (default: this binary's directory)")
	fs.StringVar(&opts.RunBase, "run-base", "", "parent of the run directories (default /run/causeway-lab)")
	fs.IntVar(&opts.Targets, "targets", labrun.DefaultTargets, "number of targets")
	fs.Var(&vips, "vip", "VIP (repeatable; default "+strings.Join(labrun.DefaultVIPs, ", ")+")")
	fs.Var(&lbs, "lb", "LB name (repeatable; default "+strings.Join(labrun.DefaultLBs, ", ")+")")
	fs.DurationVar(&opts.ReleaseDelay, "release-delay", labrun.DefaultReleaseDelay, "the proxy's NSM_IP_RELEASE_DELAY")
	fs.DurationVar(&opts.NSEExpiration, "nse-expiration", labrun.DefaultNSEExpiration, "NSE registration expiration")
	fs.DurationVar(&opts.TokenLifetime, "token-lifetime", nsmcp.DefaultTokenLifetime, "lifetime of the NSM tokens (control plane, targets, the proxy's NSM_MAX_TOKEN_LIFETIME); connections refresh at a third of it")
	fs.StringVar(&opts.LogLevel, "log-level", labrun.DefaultLogLevel, "log level of the proxy, ipam and nsp")
	fs.StringVar(&opts.ServiceProvider, "service-provider", "nftables", "the proxy's service load balancer provider: nftables or userspace")
	fs.BoolVar(&opts.NoServices, "no-services", false, "run the lab without services")
	_ = fs.Parse(args)
	if len(vips) > 0 {
		opts.VIPs = vips
	}
	if len(lbs) > 0 {
		opts.LBs = lbs
	}
	opts.Stdout = os.Stdout
	// The in-process NSM control plane logs warnings and errors only.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	lab, err := labrun.Up(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lab: %v\n", err)
		return 1
	}
	fmt.Printf("lab %s: up in %.1fs; checking\n", lab.ID(), time.Since(start).Seconds())
	green, rep := waitGreen(ctx, lab, start, *timeout)
	rep.Print(os.Stdout)
	if green {
		fmt.Printf("lab %s: all checks green %.1fs after start\n", lab.ID(), time.Since(start).Seconds())
	} else {
		fmt.Printf("lab %s: checks not green after %.1fs (logs in %s)\n", lab.ID(), time.Since(start).Seconds(), lab.RunDir()+"/logs")
	}
	if !*once && ctx.Err() == nil {
		fmt.Printf("lab %s: up; `lab status`, `lab check` and `lab down` from another terminal; Ctrl-C tears it down\n", lab.ID())
		<-ctx.Done()
	}
	fmt.Printf("lab %s: tearing down\n", lab.ID())
	if err := lab.Down(); err != nil {
		fmt.Fprintf(os.Stderr, "lab: down: %v\n", err)
		return 1
	}
	fmt.Printf("lab %s: down\n", lab.ID())
	if !green {
		return 1
	}
	return 0
}

// waitGreen runs the checks until they all pass, the timeout is over or ctx
// ends, printing a line per round.
func waitGreen(ctx context.Context, lab *labrun.Lab, start time.Time, timeout time.Duration) (bool, labrun.Report) {
	deadline := time.Now().Add(timeout)
	var last string
	var lastAt time.Time
	for {
		rep, err := lab.Check(ctx)
		if err == nil && rep.OK() {
			return true, rep
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return false, rep
		}
		var failing []string
		for _, r := range rep.Failed() {
			failing = append(failing, r.Name)
		}
		if err != nil {
			failing = append(failing, err.Error())
		}
		// A line when what is missing changes, else every 10s.
		if line := strings.Join(failing, ", "); line != last || time.Since(lastAt) > 10*time.Second {
			fmt.Printf("  %5.1fs  %d/%d checks passed; waiting for: %s\n", time.Since(start).Seconds(),
				len(rep.Rows)-len(rep.Failed()), len(rep.Rows), line)
			last, lastAt = line, time.Now()
		}
		select {
		case <-ctx.Done():
			return false, rep
		case <-time.After(time.Second):
		}
	}
}
