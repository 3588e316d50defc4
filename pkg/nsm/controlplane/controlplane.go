package controlplane

import (
	"context"
	"fmt"
	"log/slog"
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
}

// ControlPlane is a running NSMgr (with its embedded memory registry) and a
// veth forwarder registered with it, both served on unix sockets.
//
// The NSMgr's own registry is used rather than a separate memory registry:
// with one node and unix sockets this is the layout the SDK supports (its
// sandbox does the same); the registry API is served on the NSMgr socket.
type ControlPlane struct {
	// NSMgrURL is what NSCs and NSEs dial (NSM_CONNECT_TO for the proxy).
	NSMgrURL *url.URL

	cancel   context.CancelFunc
	nsmgrSrv *Server
	fwdSrv   *Server
	fwd      *forwarder.Forwarder
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
	cp := &ControlPlane{cancel: cancel}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()

	mgrName := cfg.Name + "-nsmgr"
	mgrGen := TokenGenerator(mgrName, cfg.TokenLifetime)
	mgr := nsmgr.NewServer(ctx, mgrGen,
		nsmgr.WithName(mgrName),
		nsmgr.WithAuthorizeServer(authorize.NewServer(authorize.Any())),
		nsmgr.WithAuthorizeMonitorConnectionServer(authmonitor.NewMonitorConnectionServer(authmonitor.Any())),
		nsmgr.WithDialOptions(DialOptions(mgrGen)...),
		nsmgr.WithDialTimeout(5*time.Second),
		nsmgr.WithDefaultExpiration(cfg.NSEExpiration),
	)
	cp.nsmgrSrv, err = Serve(filepath.Join(cfg.Dir, NSMgrSocket), mgr.Register)
	if err != nil {
		return nil, fmt.Errorf("serve nsmgr: %w", err)
	}
	cp.NSMgrURL = cp.nsmgrSrv.URL

	fwdName := cfg.Name + "-forwarder"
	fwdGen := TokenGenerator(fwdName, cfg.TokenLifetime)
	fwdDial := DialOptions(fwdGen)
	cp.fwd, err = forwarder.New(ctx, forwarder.Config{
		Name:           fwdName,
		NSMgrURL:       cp.NSMgrURL,
		DialOptions:    fwdDial,
		TokenGenerator: fwdGen,
	})
	if err != nil {
		return nil, fmt.Errorf("build forwarder: %w", err)
	}
	cp.fwdSrv, err = Serve(filepath.Join(cfg.Dir, ForwarderSocket), cp.fwd.Register)
	if err != nil {
		return nil, fmt.Errorf("serve forwarder: %w", err)
	}
	cp.fwdReg, err = registerForwarder(ctx, cp.NSMgrURL, fwdDial, &registry.NetworkServiceEndpoint{
		Name:                fwdName,
		NetworkServiceNames: []string{forwarder.ServiceName},
		NetworkServiceLabels: map[string]*registry.NetworkServiceLabels{
			forwarder.ServiceName: {Labels: map[string]string{"p2p": "true"}},
		},
		Url: cp.fwdSrv.URL.String(),
	})
	if err != nil {
		return nil, fmt.Errorf("register forwarder: %w", err)
	}
	slog.Info("nsm control plane up", "nsmgr", cp.NSMgrURL.String(), "forwarder", cp.fwdSrv.URL.String())
	return cp, nil
}

// Stop unregisters the forwarder, stops both servers and ends every
// goroutine the control plane started. The veth pairs the forwarder made
// stay, as the data paths of NSM's forwarder stay when its pod is
// replaced: a control plane started again adopts them, and the lab's
// teardown deletes them with their namespaces. It is safe to call more
// than once.
func (c *ControlPlane) Stop() { c.stopOnce.Do(c.stop) }

func (c *ControlPlane) stop() {
	if c.fwdReg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := c.fwdReg.Unregister(ctx); err != nil {
			slog.Debug("unregister forwarder", "error", err)
		}
		cancel()
	}
	c.cancel()
	if c.fwdSrv != nil {
		c.fwdSrv.Stop()
	}
	if c.nsmgrSrv != nil {
		c.nsmgrSrv.Stop()
	}
}
