package nsmcp

import (
	"context"
	"net/url"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"

	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/client"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/authorize"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/heal"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/sendfd"
	"github.com/networkservicemesh/sdk/pkg/tools/grpcutils"
	"github.com/networkservicemesh/sdk/pkg/tools/token"
	"google.golang.org/grpc"

	nsmbackoff "github.com/causeway-net/causeway/pkg/nsm/backoff"
	"github.com/causeway-net/causeway/pkg/nsm/liveness"
	"github.com/causeway-net/causeway/pkg/nsm/netnsurl"
)

// ClientConfig describes a kernel-mechanism NSC of the lab.
type ClientConfig struct {
	// Name of the client (its path segment name).
	Name string
	// NSMgrURL is the NSMgr it requests through.
	NSMgrURL *url.URL
	// InterfaceName is the name of its kernel interface (at most 15 chars).
	InterfaceName string
	// NetNSPath, when set, is the namespace the interface goes to (default:
	// the namespace of the process).
	NetNSPath string
	// Elements run before the kernel mechanism.
	Elements []networkservice.NetworkServiceClient
	// TokenLifetime of the client's tokens (default DefaultTokenLifetime).
	TokenLifetime time.Duration
}

// NewClient returns the SDK client chain (begin, refresh, heal, ...) with a
// kernel mechanism and sendfd, dialing the NSMgr with the lab's credentials.
// ctx bounds refresh and heal. Failed tries of a connection are spaced out
// (pkg/nsm/backoff) before they reach cfg.Elements: while the NSMgr is away
// heal re-requests as fast as the dial to its missing socket fails, which
// kept a lab target at half a core for the whole outage.
func NewClient(ctx context.Context, cfg ClientConfig) networkservice.NetworkServiceClient {
	gen := TokenGenerator(cfg.Name, cfg.TokenLifetime)
	elements := append(append([]networkservice.NetworkServiceClient{nsmbackoff.NewClient()}, cfg.Elements...),
		kernel.NewClient(kernel.WithInterfaceName(cfg.InterfaceName)),
		netnsurl.NewClient(cfg.NetNSPath),
		sendfd.NewClient(),
	)
	return client.NewClient(ctx,
		client.WithName(cfg.Name),
		client.WithClientURL(cfg.NSMgrURL),
		client.WithDialOptions(DialOptions(gen)...),
		client.WithDialTimeout(5*time.Second),
		client.WithAuthorizeClient(authorize.NewClient(authorize.Any())),
		client.WithHealClient(heal.NewClient(ctx, liveness.HealOptions(monitorClient(ctx, cfg.NSMgrURL, gen), kernelLinkLost)...)),
		client.WithAdditionalFunctionality(elements...),
	)
}

// monitorClient is a connection monitor client of the NSMgr for the heal
// check, closed when ctx ends.
func monitorClient(ctx context.Context, nsmgrURL *url.URL, gen token.GeneratorFunc) networkservice.MonitorConnectionClient {
	cc, err := grpc.NewClient(grpcutils.URLToTarget(nsmgrURL), DialOptions(gen)...)
	if err != nil {
		return failingMonitor{err}
	}
	context.AfterFunc(ctx, func() { _ = cc.Close() })
	return networkservice.NewMonitorConnectionClient(cc)
}

// failingMonitor answers nothing: the heal check then keeps the data path.
type failingMonitor struct{ err error }

func (f failingMonitor) MonitorConnections(context.Context, *networkservice.MonitorScopeSelector, ...grpc.CallOption) (networkservice.MonitorConnection_MonitorConnectionsClient, error) {
	return nil, f.err
}
