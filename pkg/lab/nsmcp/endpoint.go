package nsmcp

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/networkservicemesh/api/pkg/api/networkservice/payload"
	"github.com/networkservicemesh/api/pkg/api/registry"

	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/endpoint"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/sendfd"

	"github.com/causeway-net/causeway/pkg/nsm/keepmech"
	"github.com/causeway-net/causeway/pkg/nsm/netnsurl"
)

// EndpointConfig describes a kernel-mechanism NSE served on a unix socket and
// registered with the NSMgr.
type EndpointConfig struct {
	// Name of the NSE (unique in the registry).
	Name string
	// Service is the network service it serves; it is registered too.
	Service string
	// Labels are the NSE's labels for Service.
	Labels map[string]string
	// NSMgrURL is the NSMgr to register with.
	NSMgrURL *url.URL
	// SocketPath is where the NSE listens.
	SocketPath string
	// NetNSPath, when set, is the namespace the NSE's interfaces go to
	// (default: the namespace of the process).
	NetNSPath string
	// Elements run before the kernel mechanism (IP context, watchers...).
	Elements []networkservice.NetworkServiceServer
	// TokenLifetime of the NSE's tokens (default DefaultTokenLifetime).
	TokenLifetime time.Duration
}

// Endpoint is a served and registered NSE.
type Endpoint struct {
	URL    *url.URL
	cancel context.CancelFunc
	srv    *Server
	reg    *Registration
	once   sync.Once
}

// StartEndpoint serves and registers the NSE described by cfg until Stop.
func StartEndpoint(ctx context.Context, cfg EndpointConfig) (_ *Endpoint, err error) {
	if cfg.NSMgrURL == nil || cfg.SocketPath == "" || cfg.Name == "" || cfg.Service == "" {
		return nil, fmt.Errorf("endpoint %q: name, service, NSMgr URL and socket path are required", cfg.Name)
	}
	ctx, cancel := context.WithCancel(ctx)
	e := &Endpoint{cancel: cancel}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	gen := TokenGenerator(cfg.Name, cfg.TokenLifetime)
	dial := DialOptions(gen)
	elements := append(append([]networkservice.NetworkServiceServer{}, cfg.Elements...),
		keepmech.NewServer(),
		mechanisms.NewServer(map[string]networkservice.NetworkServiceServer{
			kernelmech.MECHANISM: kernel.NewServer(),
		}),
		netnsurl.NewServer(cfg.NetNSPath),
		sendfd.NewServer(),
	)
	ep := endpoint.NewServer(ctx, gen, endpoint.WithName(cfg.Name), endpoint.WithAdditionalFunctionality(elements...))
	e.srv, err = Serve(cfg.SocketPath, ep.Register)
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: %w", cfg.Name, err)
	}
	e.URL = e.srv.URL
	// The service is kept registered with the endpoint: a restarted
	// NSMgr's registry comes back empty.
	e.reg, err = RegisterServiceEndpoint(ctx, cfg.NSMgrURL, dial, &registry.NetworkService{Name: cfg.Service, Payload: payload.Ethernet}, &registry.NetworkServiceEndpoint{
		Name:                 cfg.Name,
		NetworkServiceNames:  []string{cfg.Service},
		NetworkServiceLabels: map[string]*registry.NetworkServiceLabels{cfg.Service: {Labels: cfg.Labels}},
		Url:                  e.URL.String(),
	})
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: %w", cfg.Name, err)
	}
	return e, nil
}

// Stop unregisters the NSE and stops serving. Connections it served stay
// in the kernel until the forwarder closes them.
func (e *Endpoint) Stop() {
	e.once.Do(func() {
		if e.reg != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := e.reg.Unregister(ctx); err != nil {
				slog.Debug("unregister endpoint", "error", err)
			}
			cancel()
		}
		e.cancel()
		if e.srv != nil {
			e.srv.Stop()
		}
	})
}
