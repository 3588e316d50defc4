package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/api/pkg/api/registry"
	registrysendfd "github.com/networkservicemesh/sdk/pkg/registry/common/sendfd"
	"github.com/networkservicemesh/sdk/pkg/tools/grpcutils"
	"github.com/networkservicemesh/sdk/pkg/tools/token"
	"google.golang.org/grpc"

	"github.com/causeway-net/causeway/pkg/nsm/registration"
	"github.com/causeway-net/causeway/pkg/nsm/sdkreplacement/authorize"
	"github.com/causeway-net/causeway/pkg/nsm/sdkreplacement/sendfd"
)

// TokenGenerator is the NSM token generator (token.GeneratorFunc).
type TokenGenerator = token.GeneratorFunc

// Endpoint is a served and registered NSE.
type Endpoint struct {
	cfg    Config
	opts   *options
	logger *slog.Logger

	cancel    context.CancelFunc
	server    *grpc.Server
	serveDone chan struct{}
	serveErr  error
	url       *url.URL
	tmpDir    string

	keeper *registration.Keeper

	servingOnce sync.Once
	stopOnce    sync.Once
	stopErr     error
}

// Start serves the endpoint chain and registers the network service and the
// endpoint through the NSMgr. ctx carries values only: the endpoint lives
// until Stop. On error nothing is left running.
func Start(ctx context.Context, cfg Config, opts ...Option) (*Endpoint, error) {
	if cfg.Name == "" || cfg.Service == "" || cfg.ConnectTo == nil || cfg.TokenGenerator == nil {
		return nil, errors.New("endpoint: name, service, NSMgr URL and token generator are required")
	}
	o := newOptions(opts)
	e := &Endpoint{cfg: cfg, opts: o, logger: o.logger.With("nse", cfg.Name, "service", cfg.Service)}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.cancel = cancel
	if err := e.serve(lctx); err != nil {
		e.teardown()
		return nil, err
	}
	if err := e.register(lctx); err != nil {
		e.teardown()
		return nil, err
	}
	if o.background {
		e.logger.Info("endpoint serving, registering in the background", "url", e.url.String(), "node", cfg.NodeName)
	} else {
		e.logServing()
	}
	return e, nil
}

// logServing logs that the endpoint serves and is registered (once).
func (e *Endpoint) logServing() {
	e.servingOnce.Do(func() {
		e.logger.Info("endpoint serving and registered", "url", e.url.String(), "node", e.cfg.NodeName)
	})
}

func (e *Endpoint) serve(ctx context.Context) error {
	listenURL := e.opts.listenURL
	if e.opts.socketPath != "" {
		if err := replaceSocket(e.opts.socketPath); err != nil {
			return err
		}
		listenURL = &url.URL{Scheme: "unix", Path: e.opts.socketPath}
	}
	if listenURL == nil {
		dir, err := os.MkdirTemp("", e.cfg.Name)
		if err != nil {
			return fmt.Errorf("endpoint socket directory: %w", err)
		}
		e.tmpDir = dir
		listenURL = &url.URL{Scheme: "unix", Path: filepath.Join(dir, "listen.on")}
	}
	var (
		l   net.Listener
		err error
	)
	switch listenURL.Scheme {
	case "unix":
		l, err = net.Listen("unix", listenURL.Path)
	case "tcp":
		l, err = net.Listen("tcp", listenURL.Host)
	default:
		err = fmt.Errorf("unsupported scheme %q", listenURL.Scheme)
	}
	if err != nil {
		return fmt.Errorf("endpoint listen on %s: %w", listenURL, err)
	}
	e.url = grpcutils.AddressToURL(l.Addr())

	auth := e.opts.authorize
	if auth == nil {
		auth = authorize.NewServer()
	}
	elements := append(append([]networkservice.NetworkServiceServer{}, e.cfg.Elements...), sendfd.NewServer())
	nse := newChain(ctx, e.cfg.Name, e.cfg.TokenGenerator, auth, elements)
	e.server = grpc.NewServer(append(leanServerOptions(), e.cfg.ServerOptions...)...)
	nse.register(e.server)
	e.serveDone = make(chan struct{})
	go func() {
		defer close(e.serveDone)
		e.serveErr = e.server.Serve(l)
	}()
	return nil
}

// replaceSocket makes ready the socket path of WithSocketPath: its
// directory exists and no stale socket file is in the way.
func replaceSocket(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("endpoint socket directory for %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale endpoint socket %s: %w", path, err)
	}
	return nil
}

// registerTryTimeout bounds each try of a registration (first or refresh).
// The registry's expire element schedules the expiry at the granted
// expiration minus the call's deadline, so a try must be much shorter than
// the shortest NSMgr expiration in use (the lab's go down to 3s); the
// keeper ends a try by cancellation, never by a deadline.
const registerTryTimeout = 2 * time.Second

// register registers the network service and the endpoint and keeps them
// registered until Stop, whatever happens to the NSMgr meanwhile.
func (e *Endpoint) register(ctx context.Context) error {
	reg := registration.Clients(ctx, e.cfg.ConnectTo, e.cfg.DialOptions, 0,
		&lifetimeClient{lifetime: registrationLifetime},
		registrysendfd.NewNetworkServiceEndpointRegistryClient())
	first := registration.WithFirstTimeout(registerTimeout)
	if e.opts.background {
		first = registration.WithoutFirstWait()
	}
	k, err := registration.Start(ctx, reg, networkService(e.cfg.Service, servicePayload, !e.opts.noNodeMatch), networkServiceEndpoint(&e.cfg, e.url.String()),
		first,
		registration.WithTryTimeout(registerTryTimeout),
		registration.WithOnChange(func(registered bool) {
			if registered {
				e.logServing()
			}
			e.opts.onRegistered(registered)
		}),
		// The keeper names the NSE itself.
		registration.WithLogger(e.opts.logger.With("service", e.cfg.Service)))
	if err != nil {
		return err
	}
	e.keeper = k
	return nil
}

// Registered reports whether the last registration or refresh succeeded.
func (e *Endpoint) Registered() bool { return e.keeper.Registered() }

// URL is where the endpoint serves.
func (e *Endpoint) URL() *url.URL { return e.url }

// Done is closed when the gRPC server stops serving: after Stop, or when
// the listener fails (then Err says why and the endpoint should be
// stopped and the process restarted or the endpoint started again).
func (e *Endpoint) Done() <-chan struct{} { return e.serveDone }

// Err is the serving error once Done is closed (nil after a Stop).
func (e *Endpoint) Err() error {
	select {
	case <-e.serveDone:
		return e.serveErr
	default:
		return nil
	}
}

// Registration is the endpoint as last registered.
func (e *Endpoint) Registration() *registry.NetworkServiceEndpoint { return e.keeper.Endpoint() }

// Stop unregisters the endpoint (bounded by ctx), stops serving (open
// streams get a second to end) and removes the socket directory. The
// targets find out through NSM heal. Stop is idempotent.
func (e *Endpoint) Stop(ctx context.Context) error {
	e.stopOnce.Do(func() {
		if e.keeper != nil {
			uctx, cancel := context.WithTimeout(ctx, registerTimeout)
			e.stopErr = e.keeper.Stop(uctx)
			cancel()
		}
		e.teardown()
		e.logger.Info("endpoint stopped")
	})
	return e.stopErr
}

func (e *Endpoint) teardown() {
	if e.server != nil {
		stopped := make(chan struct{})
		go func() {
			e.server.GracefulStop()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-time.After(time.Second):
			e.server.Stop()
			<-stopped
		}
		<-e.serveDone
	}
	e.cancel()
	if e.tmpDir != "" {
		_ = os.RemoveAll(e.tmpDir)
	}
}
