package controlplane

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"

	"github.com/causeway-net/causeway/pkg/nsm/chain/keepmechanism"
	"github.com/causeway-net/causeway/pkg/nsm/chain/netnsurl"
	nsmcreds "github.com/causeway-net/causeway/pkg/nsm/credentials"
	"github.com/causeway-net/causeway/pkg/nsm/endpoint"
)

// EndpointConfig describes a kernel-mechanism NSE of the lab, served on a
// unix socket and registered with the NSMgr.
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
	// SPIFFE, when set, are the NSE's credentials instead of the lab's.
	SPIFFE *nsmcreds.Credentials
}

// stopTimeout bounds the unregistration of a stopping endpoint.
const stopTimeout = 5 * time.Second

// Endpoint is a served and registered lab NSE: the project's one NSE
// helper (pkg/nsm/endpoint) with the lab's credentials and kernel mechanism.
type Endpoint struct {
	*endpoint.Endpoint
}

// StartEndpoint serves and registers the NSE described by cfg until Stop.
// The service is registered without the proxy's nodeName match and kept
// registered with the endpoint: a restarted NSMgr's registry comes back
// empty.
func StartEndpoint(ctx context.Context, cfg EndpointConfig) (*Endpoint, error) {
	if cfg.NSMgrURL == nil || cfg.SocketPath == "" || cfg.Name == "" || cfg.Service == "" {
		return nil, fmt.Errorf("endpoint %q: name, service, NSMgr URL and socket path are required", cfg.Name)
	}
	sec := securityOf(cfg.Name, cfg.TokenLifetime, cfg.SPIFFE)
	elements := append(append([]networkservice.NetworkServiceServer{}, cfg.Elements...),
		keepmechanism.NewServer(),
		mechanisms.NewServer(map[string]networkservice.NetworkServiceServer{
			kernelmech.MECHANISM: kernel.NewServer(),
		}),
		netnsurl.NewServer(cfg.NetNSPath),
	)
	ep, err := endpoint.Start(ctx, endpoint.Config{
		Name:           cfg.Name,
		Service:        cfg.Service,
		Labels:         cfg.Labels,
		ConnectTo:      cfg.NSMgrURL,
		TokenGenerator: sec.gen,
		DialOptions:    sec.dial,
		ServerOptions:  sec.server,
		Elements:       elements,
	}, endpoint.WithSocketPath(cfg.SocketPath), endpoint.WithoutNodeMatch(),
		endpoint.WithAuthorizeServer(sec.authServer))
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: %w", cfg.Name, err)
	}
	return &Endpoint{Endpoint: ep}, nil
}

// Stop unregisters the NSE and stops serving. Connections it served stay
// in the kernel until the forwarder closes them.
func (e *Endpoint) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := e.Endpoint.Stop(ctx); err != nil {
		slog.Debug("unregister endpoint", "error", err)
	}
}
