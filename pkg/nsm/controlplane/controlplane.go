package controlplane

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"github.com/networkservicemesh/api/pkg/api/registry"

	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/nsmgr"
	authmonitor "github.com/networkservicemesh/sdk/pkg/tools/monitorconnection/authorize"

	"github.com/causeway-net/causeway/pkg/forwarder"
	"github.com/causeway-net/causeway/pkg/nsm/sdkreplacement/authorize"
)

// SDKConfigDir is where the SDK's NSMgr watches for excluded_prefixes.yaml
// (its excludedprefixes server, whose path no option changes); the watch
// makes the directory, with its parents, when it is missing.
const SDKConfigDir = "/var/lib/networkservicemesh/config"

// Socket file names inside Config.Dir.
const (
	NSMgrSocket     = "nsmgr.sock"
	ForwarderSocket = "forwarder.sock"
)

// Config describes the control plane.
type Config struct {
	// Dir holds the unix sockets (the lab's run directory).
	Dir string
	// Name prefixes the NSMgr's and the forwarder's names (default "lab").
	Name string
	// TokenLifetime of the control plane's own tokens (default DefaultTokenLifetime).
	TokenLifetime time.Duration
	// NSEExpiration is how long an NSE registration lives without a refresh
	// (default one minute, as NSM's). It bounds how long an NSE killed with
	// SIGKILL stays registered, hence how fast its clients heal away from it.
	// Values under 3s are raised to 3s (a registration try may take 2s).
	NSEExpiration time.Duration

	// The fields below make the control plane one node of several.

	// Registry, when set, is the registry the nodes share (StartRegistry);
	// the NSMgr then keeps none of its own.
	Registry *url.URL
	// Listen, when set, is a TCP address (host:port) on which the NSMgr is
	// served too, for the forwarders of other nodes; the registry knows
	// this node's endpoints by it. Needs Registry.
	Listen string
	// Remote is the forwarder's remote mechanism (its zero value: none).
	Remote forwarder.Remote
}

// ControlPlane is a running NSMgr and the forwarder registered with it, both
// served on unix sockets.
//
// Alone on its machine (no Config.Registry), the NSMgr's own registry is
// used rather than a separate memory registry: with one node and unix
// sockets this is the layout the SDK supports (its sandbox does the same);
// the registry API is served on the NSMgr socket. As one node of several,
// the NSMgr uses the registry the nodes share and is served on TCP too, as
// NSM's NSMgrs are, for the other nodes' forwarders.
type ControlPlane struct {
	// NSMgrURL is what NSCs and NSEs dial (NSM_CONNECT_TO for the proxy).
	NSMgrURL *url.URL
	// NodeURL is the NSMgr's TCP URL when Config.Listen is set (nil else).
	NodeURL *url.URL

	cancel   context.CancelFunc
	nsmgrSrv *Server
	tcpSrv   *Server
	ctx      context.Context
	cfg      Config
	fwdMu    sync.Mutex // the forwarder's run, replaced by RestartForwarder
	fwdStop  context.CancelFunc
	fwd      *forwarder.Forwarder
	fwdSrv   *Server
	fwdReg   *Registration
	stopOnce sync.Once
}

// Start runs the control plane until Stop (or until ctx ends; Stop must
// still be called to release everything).
func Start(ctx context.Context, cfg Config) (_ *ControlPlane, err error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("controlplane: Dir is required")
	}
	if cfg.Name == "" {
		cfg.Name = "lab"
	}
	if cfg.NSEExpiration <= 0 {
		cfg.NSEExpiration = time.Minute
	}
	cfg.NSEExpiration = max(cfg.NSEExpiration, 3*time.Second)
	ctx, cancel := context.WithCancel(ctx)
	cp := &ControlPlane{cancel: cancel, ctx: ctx, cfg: cfg}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()

	if err := cp.startNSMgr(ctx, cfg); err != nil {
		return nil, err
	}
	if err := cp.startForwarder(); err != nil {
		return nil, err
	}
	slog.Info("nsm control plane up", "nsmgr", cp.NSMgrURL.String(), "forwarder", cp.fwdSrv.URL.String())
	return cp, nil
}

// startNSMgr serves the NSMgr on its unix socket and, for a node of
// several, on its TCP address.
func (c *ControlPlane) startNSMgr(ctx context.Context, cfg Config) error {
	if cfg.Listen != "" && cfg.Registry == nil {
		return fmt.Errorf("controlplane: Listen %s needs a shared Registry", cfg.Listen)
	}
	var tcp net.Listener
	mgrName := cfg.Name + "-nsmgr"
	mgrGen := TokenGenerator(mgrName, cfg.TokenLifetime)
	opts := []nsmgr.Option{
		nsmgr.WithName(mgrName),
		nsmgr.WithAuthorizeServer(authorize.NewServer(authorize.Any())),
		nsmgr.WithAuthorizeMonitorConnectionServer(authmonitor.NewMonitorConnectionServer(authmonitor.Any())),
		nsmgr.WithDialOptions(DialOptions(mgrGen)...),
		nsmgr.WithDialTimeout(5 * time.Second),
		nsmgr.WithDefaultExpiration(cfg.NSEExpiration),
	}
	if cfg.Registry != nil {
		opts = append(opts, nsmgr.WithRegistry(cfg.Registry))
	}
	if cfg.Listen != "" {
		// Bound first: the NSMgr must know the URL it is reached by.
		var err error
		if tcp, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("nsmgr: listen on %s: %w", cfg.Listen, err)
		}
		opts = append(opts, nsmgr.WithURL((&url.URL{Scheme: "tcp", Host: tcp.Addr().String()}).String()))
	}
	mgr := nsmgr.NewServer(ctx, mgrGen, opts...)
	if tcp != nil {
		c.tcpSrv = serveOn(tcp, &url.URL{Scheme: "tcp", Host: tcp.Addr().String()}, "", mgr.Register)
		c.NodeURL = c.tcpSrv.URL
	}
	var err error
	c.nsmgrSrv, err = Serve(filepath.Join(cfg.Dir, NSMgrSocket), mgr.Register)
	if err != nil {
		return fmt.Errorf("serve nsmgr: %w", err)
	}
	c.NSMgrURL = c.nsmgrSrv.URL
	return nil
}

// startForwarder builds, serves and registers the forwarder; its run ends
// with c.fwdStop (its registration abandoned, as when a process dies) or
// with the control plane.
func (c *ControlPlane) startForwarder() error {
	c.fwdMu.Lock()
	defer c.fwdMu.Unlock()
	ctx, stop := context.WithCancel(c.ctx)
	c.fwdStop = stop
	name := c.cfg.Name + "-forwarder"
	gen := TokenGenerator(name, c.cfg.TokenLifetime)
	dial := DialOptions(gen)
	fwd, err := forwarder.New(ctx, forwarder.Config{
		Name:           name,
		NSMgrURL:       c.NSMgrURL,
		DialOptions:    dial,
		TokenGenerator: gen,
		Remote:         c.cfg.Remote,
	})
	if err != nil {
		return fmt.Errorf("build forwarder: %w", err)
	}
	c.fwd = fwd
	c.fwdSrv, err = Serve(filepath.Join(c.cfg.Dir, ForwarderSocket), fwd.Register)
	if err != nil {
		return fmt.Errorf("serve forwarder: %w", err)
	}
	c.fwdReg, err = registerForwarder(ctx, c.NSMgrURL, dial, &registry.NetworkServiceEndpoint{
		Name:                name,
		NetworkServiceNames: []string{forwarder.ServiceName},
		NetworkServiceLabels: map[string]*registry.NetworkServiceLabels{
			forwarder.ServiceName: {Labels: map[string]string{"p2p": "true"}},
		},
		Url: c.fwdSrv.URL.String(),
	})
	if err != nil {
		return fmt.Errorf("register forwarder: %w", err)
	}
	return nil
}

// RestartForwarder replaces the forwarder by a new one of the same name on
// the same socket, as when NSM's forwarder pod is replaced: the old one
// stops at once without unregistering; the data paths it made stay and the
// new one adopts them on the next refresh of their connections.
func (c *ControlPlane) RestartForwarder() error {
	c.fwdMu.Lock()
	c.fwdStop()
	c.fwd.Wait()
	c.fwdSrv.Stop()
	c.fwdSrv, c.fwdReg = nil, nil
	c.fwdMu.Unlock()
	return c.startForwarder()
}

// Stop unregisters the forwarder, stops both servers and ends every
// goroutine the control plane started. The veth pairs the forwarder made
// stay, as the data paths of NSM's forwarder stay when its pod is
// replaced: a control plane started again adopts them, and the lab's
// teardown deletes them with their namespaces. It is safe to call more
// than once.
func (c *ControlPlane) Stop() { c.stopOnce.Do(c.stop) }

func (c *ControlPlane) stop() {
	c.fwdMu.Lock()
	defer c.fwdMu.Unlock()
	if c.fwdReg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := c.fwdReg.Unregister(ctx); err != nil {
			slog.Debug("unregister forwarder", "error", err)
		}
		cancel()
	}
	c.cancel()
	if c.fwd != nil {
		c.fwd.Wait()
	}
	if c.fwdSrv != nil {
		c.fwdSrv.Stop()
	}
	if c.nsmgrSrv != nil {
		c.nsmgrSrv.Stop()
	}
	if c.tcpSrv != nil {
		c.tcpSrv.Stop()
	}
}
