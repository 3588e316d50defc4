package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/causeway-net/causeway/pkg/lab/lbstub"
	"github.com/causeway-net/causeway/pkg/lab/targetstub"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
	"github.com/causeway-net/causeway/pkg/nsm/nsmlog"
)

// stubContext prepares a stub process: JSON logs on stderr, quiet SDK, and
// a context that ends on SIGTERM or SIGINT.
func stubContext(component string) (context.Context, context.CancelFunc) {
	installStubLogger(os.Stderr, component)
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
}

// installStubLogger makes JSON lines on w, at INFO and above, the log of
// the process and of the NSM SDK in it. Without the SDK's logger the SDK
// wrote through the standard log package: every one of its lines came out
// at INFO with its level as text ("[DEBUG] passed clientURL: ..." every
// 5 s in nsm.log, errors at INFO too).
func installStubLogger(w io.Writer, component string) {
	l := slog.New(slog.NewJSONHandler(w, nil)).With("component", component)
	slog.SetDefault(l)
	nsmlog.Install(l)
	controlplane.QuietSDKLogs()
}

// runStub runs one stub process until SIGTERM or SIGINT (see stubContext)
// and returns its exit status.
func runStub(component, what string, run func(ctx context.Context) error) int {
	ctx, stop := stubContext(component)
	defer stop()
	if err := run(ctx); err != nil {
		slog.Error(what+" failed", "error", err)
		return 1
	}
	slog.Info(what + " stopped")
	return 0
}

// spiffeUsage is the help of the stubs' -spiffe flag.
const spiffeUsage = "SPIFFE credentials from the Workload API at SPIFFE_ENDPOINT_SOCKET instead of the lab's (a stub run as a pod where NSM is secure)"

// withSPIFFE runs run with the stub's credentials: the workload's SPIFFE
// credentials when spiffe is set (waiting for the first SVID), closed when
// run returns, or nil (the lab's own).
func withSPIFFE(ctx context.Context, spiffe bool, lifetime time.Duration, run func(*credentials.Credentials) error) error {
	if !spiffe {
		return run(nil)
	}
	creds, err := credentials.FromWorkloadAPI(ctx, lifetime, nil)
	if err != nil {
		return err
	}
	defer creds.Close()
	return run(creds)
}

// parseStubFlags reads the flags every stub has: the NSMgr URL and the VIPs.
func parseStubFlags(nsmgr string, vips []string) (*url.URL, []netip.Addr, error) {
	u, err := parseURL(nsmgr)
	if err != nil {
		return nil, nil, err
	}
	addrs, err := parseAddrs(vips)
	if err != nil {
		return nil, nil, err
	}
	return u, addrs, nil
}

func parseAddrs(vs []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, v := range vs {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func parseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("invalid NSMgr URL %q", s)
	}
	return u, nil
}

// lbCmd is one LB stub (`lab lb`, started by the lab in the LB's namespace).
func lbCmd(args []string) int {
	fs := newCmdLine("lab lb")
	var cfg lbstub.Config
	var vips, routes listFlag
	nsmgr := fs.String("nsmgr", "", "NSMgr URL")
	fs.StringVar(&cfg.Name, "name", "", "NSE name")
	fs.StringVar(&cfg.Service, "service", "", "conduit network service <conduit>.<trench>.<ns>")
	fs.StringVar(&cfg.SocketPath, "socket", "", "unix socket of the NSE")
	fs.StringVar(&cfg.TargetsDir, "targets-dir", "", "publication directory of the targets")
	fromPods := fs.String("targets-from-pods", "", "label selector of the targets' pods, whose addresses are read from their annotations in POD_NAMESPACE (a stub run as a pod) instead of -targets-dir")
	fs.Var(&vips, "vip", "VIP address (repeatable)")
	fs.Var(&routes, "route", "static route dst=via (repeatable)")
	spiffe := fs.Bool("spiffe", false, spiffeUsage)
	if _, code, ok := fs.parse(args); !ok {
		return code
	}
	var err error
	if cfg.NSMgrURL, cfg.VIPs, err = parseStubFlags(*nsmgr, vips); err != nil {
		fmt.Fprintln(stderr, "lab lb:", err)
		return 2
	}
	for _, r := range routes {
		dst, via, ok := strings.Cut(r, "=")
		p, perr := netip.ParsePrefix(dst)
		a, aerr := netip.ParseAddr(via)
		if !ok || perr != nil || aerr != nil {
			fmt.Fprintf(stderr, "lab lb: invalid route %q (want dst=via)\n", r)
			return 2
		}
		cfg.Routes = append(cfg.Routes, lbstub.Route{Dst: p, Via: a})
	}
	if *fromPods != "" {
		if cfg.Targets, err = podsBoard(*fromPods); err != nil {
			fmt.Fprintln(stderr, "lab lb:", err)
			return 2
		}
	}
	return runStub("lb", "lb stub", func(ctx context.Context) error {
		return withSPIFFE(ctx, *spiffe, controlplane.DefaultTokenLifetime, func(c *credentials.Credentials) error {
			cfg.SPIFFE = c
			return lbstub.Run(ctx, cfg)
		})
	})
}

// targetCmd is one target stub (`lab target`, started by the lab in the
// target's namespace).
func targetCmd(args []string) int {
	fs := newCmdLine("lab target")
	var cfg targetstub.Config
	var vips, labels listFlag
	nsmgr := fs.String("nsmgr", "", "NSMgr URL")
	fs.StringVar(&cfg.Name, "name", "", "target name")
	fs.StringVar(&cfg.Service, "service", "", "the proxy's network service proxy.<conduit>.<trench>.<ns>")
	fs.IntVar(&cfg.Port, "port", 0, "TCP and UDP echo port on the VIPs")
	fs.IntVar(&cfg.ServicePort, "service-port", 0, "TCP and UDP echo port on every address (a service load balancer endpoint); 0: none")
	fs.StringVar(&cfg.PublishDir, "publish-dir", "", "publication directory")
	onPod := fs.Bool("publish-on-pod", false, "publish on the annotations of the target's own pod (named -name, in POD_NAMESPACE; a stub run as a pod) instead of -publish-dir")
	fs.DurationVar(&cfg.TokenLifetime, "token-lifetime", controlplane.DefaultTokenLifetime, "lifetime of the target's NSM tokens (it refreshes at a third of it)")
	fs.Var(&vips, "vip", "VIP address (repeatable)")
	fs.Var(&labels, "label", "request label key=value (repeatable)")
	spiffe := fs.Bool("spiffe", false, spiffeUsage)
	if _, code, ok := fs.parse(args); !ok {
		return code
	}
	var err error
	if cfg.NSMgrURL, cfg.VIPs, err = parseStubFlags(*nsmgr, vips); err != nil {
		fmt.Fprintln(stderr, "lab target:", err)
		return 2
	}
	for _, kv := range labels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			fmt.Fprintf(stderr, "lab target: invalid label %q\n", kv)
			return 2
		}
		if cfg.Labels == nil {
			cfg.Labels = map[string]string{}
		}
		cfg.Labels[k] = v
	}
	if *onPod {
		if cfg.Publish, err = podsBoard(""); err != nil {
			fmt.Fprintln(stderr, "lab target:", err)
			return 2
		}
	}
	// Run as a pod (or by the lab, which sets what the downward API would),
	// the target names its pod on its connection.
	_, cfg.PodLabels = os.LookupEnv("POD_NAME")
	return runStub("target", "target stub", func(ctx context.Context) error {
		return withSPIFFE(ctx, *spiffe, cfg.TokenLifetime, func(c *credentials.Credentials) error {
			cfg.SPIFFE = c
			return targetstub.Run(ctx, cfg)
		})
	})
}

// nsmCmd is the lab's NSM control plane (`lab nsm`, started by the lab in
// the host namespace): NSMgr, registry and veth forwarder on unix sockets
// in the run directory, until SIGTERM.
func nsmCmd(args []string) int {
	fs := newCmdLine("lab nsm")
	var cfg controlplane.Config
	fs.StringVar(&cfg.Dir, "dir", "", "directory of the unix sockets (the run directory)")
	fs.StringVar(&cfg.Name, "name", "lab", "prefix of the NSMgr's and the forwarder's names")
	fs.DurationVar(&cfg.NSEExpiration, "nse-expiration", time.Minute, "NSE registration expiration")
	fs.DurationVar(&cfg.TokenLifetime, "token-lifetime", controlplane.DefaultTokenLifetime, "lifetime of the NSMgr's and the forwarder's tokens")
	if _, code, ok := fs.parse(args); !ok {
		return code
	}
	ctx, stop := stubContext("nsm")
	defer stop()
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		slog.Error("nsm control plane failed", "error", err)
		return 1
	}
	<-ctx.Done()
	cp.Stop()
	slog.Info("nsm control plane stopped")
	return 0
}
