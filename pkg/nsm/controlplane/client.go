package controlplane

import (
	"context"
	"net/url"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"

	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/client"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/heal"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/sendfd"
	"github.com/networkservicemesh/sdk/pkg/tools/grpcutils"
	"google.golang.org/grpc"

	nsmbackoff "github.com/causeway-net/causeway/pkg/nsm/chain/backoff"
	"github.com/causeway-net/causeway/pkg/nsm/chain/liveness"
	"github.com/causeway-net/causeway/pkg/nsm/chain/netnsurl"
	nsmcreds "github.com/causeway-net/causeway/pkg/nsm/credentials"
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
	// SPIFFE, when set, are the client's credentials instead of the lab's.
	SPIFFE *nsmcreds.Credentials
}

// NewClient returns the SDK client chain (begin, refresh, heal, ...) with a
// kernel mechanism and sendfd, dialing the NSMgr with the lab's credentials.
// ctx bounds refresh and heal. Failed tries of a connection are spaced out
// (pkg/nsm/chain/backoff) before they reach cfg.Elements: while the NSMgr is away
// heal re-requests as fast as the dial to its missing socket fails, which
// kept a lab target at half a core for the whole outage. A pause ends when
// ctx does.
func NewClient(ctx context.Context, cfg ClientConfig) networkservice.NetworkServiceClient {
	sec := securityOf(cfg.Name, cfg.TokenLifetime, cfg.SPIFFE)
	healOpts, nsmgrElements := healOptions(ctx, cfg.NSMgrURL, sec.dial)
	elements := append(append(append([]networkservice.NetworkServiceClient{nsmbackoff.NewClient(nsmbackoff.WithLife(ctx))}, nsmgrElements...), cfg.Elements...),
		kernel.NewClient(kernel.WithInterfaceName(cfg.InterfaceName)),
		netnsurl.NewClient(cfg.NetNSPath),
		sendfd.NewClient(),
	)
	return client.NewClient(ctx,
		client.WithName(cfg.Name),
		client.WithClientURL(cfg.NSMgrURL),
		client.WithDialOptions(sec.dial...),
		client.WithDialTimeout(5*time.Second),
		client.WithAuthorizeClient(sec.authClient),
		client.WithHealClient(heal.NewClient(ctx, healOpts...)),
		client.WithAdditionalFunctionality(elements...),
	)
}

// healOptions are the heal check's options: the connection's data path
// first (dataPathFirst), then the word of a connection monitor of the
// NSMgr (pkg/nsm/chain/liveness), closed when ctx ends; and the chain
// elements that record the NSMgr run of each connection and end a heal's
// count. If the monitor cannot be made, the NSMgr's word keeps the data
// path.
func healOptions(ctx context.Context, nsmgrURL *url.URL, dial []grpc.DialOption) ([]heal.Option, []networkservice.NetworkServiceClient) {
	nsmgr, err := liveness.Dial(grpcutils.URLToTarget(nsmgrURL), dial...)
	if err != nil {
		dp := newDataPathFirst(liveness.Check(failingMonitor{err}, kernelLinkLost, nil, nil))
		return liveness.HealOptions(dp.check), []networkservice.NetworkServiceClient{dp}
	}
	context.AfterFunc(ctx, func() { _ = nsmgr.Close() })
	dp := newDataPathFirst(nsmgr.Check(kernelLinkLost, nil))
	return liveness.HealOptions(dp.check), []networkservice.NetworkServiceClient{nsmgr.NewClient(), dp}
}

// failingMonitor answers nothing: the heal check then keeps the data path.
type failingMonitor struct{ err error }

func (f failingMonitor) MonitorConnections(context.Context, *networkservice.MonitorScopeSelector, ...grpc.CallOption) (networkservice.MonitorConnection_MonitorConnectionsClient, error) {
	return nil, f.err
}
