package lbstub

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/pkg/lab/targetaddrs"
	"github.com/causeway-net/causeway/pkg/lab/topo"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
)

// Config describes one LB stub.
type Config struct {
	// Name is the NSE name (unique per LB).
	Name string
	// NSMgrURL is the NSMgr to register with.
	NSMgrURL *url.URL
	// Service is the conduit's network service, <conduit>.<trench>.<ns>.
	Service string
	// Labels are the NSE's labels for Service.
	Labels map[string]string
	// SocketPath is where the NSE listens.
	SocketPath string
	// NetNSPath, when set, is the LB's namespace for a stub run in-process for
	// another namespace (default: the process's namespace).
	NetNSPath string
	// VIPs are routed toward the published targets.
	VIPs []netip.Addr
	// TargetsDir is the publication directory of the target stubs.
	TargetsDir string
	// Targets, when set, is the board of the target stubs' addresses read
	// instead of TargetsDir (targetaddrs.Pods in a cluster).
	Targets targetaddrs.Board `json:"-"`
	// PollInterval between two reads of TargetsDir (default 200ms).
	PollInterval time.Duration
	// Routes are static routes set up at start, e.g. toward the external
	// host's addresses whatever LB the proxy picked for the return traffic.
	Routes []Route
	// SPIFFE, when set, are the NSE's credentials instead of the lab's (an
	// LB stub run as a pod of a cluster whose NSM is secure).
	SPIFFE *credentials.Credentials
}

// Route is a static route of the LB's namespace.
type Route struct {
	Dst netip.Prefix
	Via netip.Addr
}

// LB is a running LB stub.
type LB struct {
	cfg    Config
	ns     netns.NsHandle
	ep     *controlplane.Endpoint
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// Start sets the namespace up for forwarding (topo.RouterSysctls), serves
// and registers the NSE and keeps the VIP routes in step with the
// publications until Stop.
func Start(ctx context.Context, cfg Config) (_ *LB, err error) {
	if cfg.Name == "" || cfg.NSMgrURL == nil || cfg.Service == "" || cfg.SocketPath == "" {
		return nil, fmt.Errorf("lb stub: name, NSMgr URL, service and socket path are required")
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	if cfg.Targets == nil {
		cfg.Targets = targetaddrs.Dir(cfg.TargetsDir)
	}
	if err := topo.ApplySysctls(cfg.NetNSPath, topo.RouterSysctls); err != nil {
		return nil, fmt.Errorf("lb %s: %w", cfg.Name, err)
	}
	for _, r := range cfg.Routes {
		if err := topo.AddRoute(cfg.NetNSPath, r.Dst, r.Via); err != nil {
			return nil, fmt.Errorf("lb %s: %w", cfg.Name, err)
		}
	}
	l := &LB{cfg: cfg}
	if cfg.NetNSPath != "" {
		l.ns, err = netns.GetFromPath(cfg.NetNSPath)
	} else {
		l.ns, err = netns.Get()
	}
	if err != nil {
		return nil, fmt.Errorf("lb %s: open netns: %w", cfg.Name, err)
	}
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	l.ep, err = controlplane.StartEndpoint(life, controlplane.EndpointConfig{
		Name:       cfg.Name,
		Service:    cfg.Service,
		Labels:     cfg.Labels,
		NSMgrURL:   cfg.NSMgrURL,
		SocketPath: cfg.SocketPath,
		NetNSPath:  cfg.NetNSPath,
		SPIFFE:     cfg.SPIFFE,
	})
	if err != nil {
		cancel()
		_ = l.ns.Close()
		return nil, fmt.Errorf("lb %s: %w", cfg.Name, err)
	}
	l.wg.Add(1)
	go l.run(life)
	slog.Info("lb stub up", "lb", cfg.Name, "service", cfg.Service, "vips", cfg.VIPs)
	return l, nil
}

// run re-reads the publications and syncs the routes every PollInterval.
func (l *LB) run(ctx context.Context) {
	defer l.wg.Done()
	t := time.NewTicker(l.cfg.PollInterval)
	defer t.Stop()
	var lastErr string
	announced := false
	for {
		ready, err := l.sync(ctx)
		if ctx.Err() != nil {
			return
		}
		if ready && !announced {
			// The lab routes the VIPs through this LB only from now on, as
			// a real LB announces them (BGP) once it can reach targets.
			slog.Info(ReadyMessage, "lb", l.cfg.Name)
			announced = true
		}
		if msg := fmt.Sprint(err); err != nil && msg != lastErr {
			slog.Warn("lb route sync", "lb", l.cfg.Name, "error", err)
			lastErr = msg
		} else if err == nil {
			lastErr = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ReadyMessage is logged once the LB has a target route for every VIP.
const ReadyMessage = "lb stub ready"

func (l *LB) sync(ctx context.Context) (bool, error) {
	pubs, err := l.cfg.Targets.Read(ctx)
	if err != nil {
		return false, err
	}
	return syncRoutes(l.ns, l.cfg.VIPs, targetaddrs.Addrs(pubs))
}

// Stop unregisters the NSE, stops the route loop and removes the VIP routes.
func (l *LB) Stop() {
	l.once.Do(func() {
		l.ep.Stop()
		l.cancel()
		l.wg.Wait()
		removeRoutes(l.ns, l.cfg.VIPs)
		_ = l.ns.Close()
	})
}

// Run starts the LB stub and keeps it up until ctx ends, then stops it: the
// body of a process that is one LB (`ip netns exec <lb-ns> lab lb ...`).
func Run(ctx context.Context, cfg Config) error {
	l, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	l.Stop()
	return nil
}
