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
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/endpoint"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/authorize"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/sendfd"
	registryclient "github.com/networkservicemesh/sdk/pkg/registry/chains/client"
	registryretry "github.com/networkservicemesh/sdk/pkg/registry/common/retry"
	registrysendfd "github.com/networkservicemesh/sdk/pkg/registry/common/sendfd"
	"github.com/networkservicemesh/sdk/pkg/tools/grpcutils"
	"github.com/networkservicemesh/sdk/pkg/tools/token"
	"google.golang.org/grpc"
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

	nseClient registry.NetworkServiceEndpointRegistryClient
	nse       *registry.NetworkServiceEndpoint

	stopOnce sync.Once
	stopErr  error
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
	e.logger.Info("endpoint serving and registered", "url", e.url.String(), "node", cfg.NodeName)
	return e, nil
}

func (e *Endpoint) serve(ctx context.Context) error {
	listenURL := e.opts.listenURL
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
	nse := endpoint.NewServer(ctx, e.cfg.TokenGenerator,
		endpoint.WithName(e.cfg.Name),
		endpoint.WithAuthorizeServer(auth),
		endpoint.WithAdditionalFunctionality(elements...),
	)
	e.server = grpc.NewServer(e.cfg.ServerOptions...)
	nse.Register(e.server)
	e.serveDone = make(chan struct{})
	go func() {
		defer close(e.serveDone)
		e.serveErr = e.server.Serve(l)
	}()
	return nil
}

// registerTryTimeout bounds each try of a registration (first or refresh).
// The registry's expire element schedules the expiry at the granted
// expiration minus the call's deadline, so a try must be much shorter than
// the shortest NSMgr expiration in use (the lab's go down to 3s).
const registerTryTimeout = 2 * time.Second

func (e *Endpoint) register(ctx context.Context) error {
	nsClient := registryclient.NewNetworkServiceRegistryClient(ctx,
		registryclient.WithClientURL(e.cfg.ConnectTo),
		registryclient.WithDialOptions(e.cfg.DialOptions...))
	rctx, cancel := context.WithTimeout(ctx, e.opts.registerTimeout)
	defer cancel()
	if _, err := nsClient.Register(rctx, networkService(e.cfg.Service, e.opts.payload)); err != nil {
		return fmt.Errorf("register network service %s: %w", e.cfg.Service, err)
	}

	e.nseClient = registryclient.NewNetworkServiceEndpointRegistryClient(ctx,
		registryclient.WithClientURL(e.cfg.ConnectTo),
		registryclient.WithDialOptions(e.cfg.DialOptions...),
		// Short tries (see registerTryTimeout): the SDK's 15s would make an
		// NSMgr expiration of 15s or less unregister the endpoint at once.
		registryclient.WithNSERetryClient(registryretry.NewNetworkServiceEndpointRegistryClient(ctx,
			registryretry.WithTryTimeout(registerTryTimeout))),
		registryclient.WithNSEAdditionalFunctionality(
			&lifetimeClient{lifetime: e.opts.lifetime},
			registrysendfd.NewNetworkServiceEndpointRegistryClient(),
		))
	// The registry's expire element schedules the expiry at the granted
	// expiration minus the Register call's deadline: a deadline as long as a
	// short NSMgr expiration would unregister the endpoint at once. The call
	// is bounded by a cancellation instead.
	nctx, ncancel := context.WithCancel(ctx)
	defer ncancel()
	bound := time.AfterFunc(e.opts.registerTimeout, ncancel)
	defer bound.Stop()
	nse, err := e.nseClient.Register(nctx, networkServiceEndpoint(&e.cfg, e.url.String()))
	if err != nil {
		return fmt.Errorf("register endpoint %s: %w", e.cfg.Name, err)
	}
	e.nse = nse
	return nil
}

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
func (e *Endpoint) Registration() *registry.NetworkServiceEndpoint { return e.nse.Clone() }

// Stop unregisters the endpoint (bounded by ctx), stops serving (open
// streams get a second to end) and removes the socket directory. The
// targets find out through NSM heal. Stop is idempotent.
func (e *Endpoint) Stop(ctx context.Context) error {
	e.stopOnce.Do(func() {
		if e.nse != nil {
			uctx, cancel := context.WithTimeout(ctx, e.opts.registerTimeout)
			if _, err := e.nseClient.Unregister(uctx, e.nse.Clone()); err != nil {
				e.stopErr = fmt.Errorf("unregister endpoint %s: %w", e.cfg.Name, err)
			}
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
