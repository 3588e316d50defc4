package forwarder

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	vxlanmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/vxlan"
	"google.golang.org/grpc"

	"github.com/networkservicemesh/sdk-kernel/pkg/kernel/networkservice/connectioncontextkernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/client"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/endpoint"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/connect"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/discover"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/filtermechanisms"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/recvfd"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanismtranslation"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/null"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/roundrobin"
	registryclient "github.com/networkservicemesh/sdk/pkg/registry/chains/client"
	registryrecvfd "github.com/networkservicemesh/sdk/pkg/registry/common/recvfd"
	"github.com/networkservicemesh/sdk/pkg/registry/core/chain"
	"github.com/networkservicemesh/sdk/pkg/tools/token"

	"github.com/causeway-net/causeway/pkg/forwarder/dumpretry"
	"github.com/causeway-net/causeway/pkg/forwarder/findretry"
	"github.com/causeway-net/causeway/pkg/forwarder/reaper"
)

// ServiceName is the network service forwarders register under; the NSMgr
// looks forwarders up by it.
const ServiceName = "forwarder"

// Config says how the forwarder reaches its NSMgr.
type Config struct {
	// Name is the forwarder's NSE name.
	Name string
	// NSMgrURL is the NSMgr's (unix socket) URL, for discovery and to reach NSEs.
	NSMgrURL *url.URL
	// DialOptions must pass file descriptors (grpcfd) and carry tokens.
	DialOptions []grpc.DialOption
	// TokenGenerator signs the forwarder's path segments.
	TokenGenerator token.GeneratorFunc
	// DialTimeout bounds dials toward the NSMgr (default 5s).
	DialTimeout time.Duration
	// Remote, when its NodeIP is set, lets the forwarder join namespaces of
	// two nodes with VXLAN (the zero value: one node, veth pairs only).
	Remote Remote
	// ReapInterval is how often the forwarder looks for connections whose
	// client's or endpoint's pod is gone, to close them (pkg/forwarder/reaper;
	// default reaper.DefaultInterval, negative: never).
	ReapInterval time.Duration
}

// Forwarder is the forwarder endpoint. Register it on a gRPC server on a
// unix socket (FD passing needs one) and register that URL with the NSMgr.
type Forwarder struct {
	endpoint.Endpoint
	reaped chan struct{} // closed when the reaper's sweeps have ended
}

// New builds the forwarder chain. ctx bounds its lifetime.
//
// Server side: dumpretry (runs the rest again after an interrupted netlink
// dump), recvfd, the NSC's namespace kept for a Close (nscnetns.go), the
// reaper (closes the connections whose pod is gone),
// discover (its registry listings run again when they break, see
// findretry), roundrobin, then ServerElements. Client side: mechanism
// translation, then ClientElements. Call Wait after ctx ends.
func New(ctx context.Context, cfg Config) (*Forwarder, error) {
	if cfg.NSMgrURL == nil {
		return nil, fmt.Errorf("forwarder: NSMgr URL is required")
	}
	if cfg.TokenGenerator == nil {
		return nil, fmt.Errorf("forwarder: token generator is required")
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.ReapInterval == 0 {
		cfg.ReapInterval = reaper.DefaultInterval
	}
	nsClient := registryclient.NewNetworkServiceRegistryClient(ctx,
		registryclient.WithClientURL(cfg.NSMgrURL),
		registryclient.WithDialOptions(cfg.DialOptions...),
		registryclient.WithDialTimeout(cfg.DialTimeout))
	nseClient := registryclient.NewNetworkServiceEndpointRegistryClient(ctx,
		registryclient.WithClientURL(cfg.NSMgrURL),
		registryclient.WithDialOptions(cfg.DialOptions...),
		registryclient.WithDialTimeout(cfg.DialTimeout),
		// NSE URLs come back as inode:// with the socket passed by fd.
		registryclient.WithNSEAdditionalFunctionality(registryrecvfd.NewNetworkServiceEndpointRegistryClient()))
	// discover takes a listing that broke for a whole one (and fails the
	// request with "candidates not found"): list again until it is whole.
	nseClient = chain.NewNetworkServiceEndpointRegistryClient(
		findretry.NewNetworkServiceEndpointRegistryClient(findretry.WithRetried(func(err error) {
			slog.Info("registry listing broke, listing again", "forwarder", cfg.Name, "error", err)
		})),
		nseClient)

	connectNSE := connect.NewServer(client.NewClient(ctx,
		client.WithName(cfg.Name),
		client.WithAdditionalFunctionality(
			append([]networkservice.NetworkServiceClient{mechanismtranslation.NewClient()}, ClientElements(cfg.Remote)...)...,
		),
		client.WithDialOptions(cfg.DialOptions...),
		client.WithDialTimeout(cfg.DialTimeout),
		client.WithoutRefresh(),
	))
	reap := reaper.New()
	servers := []networkservice.NetworkServiceServer{
		// A request that lost the race of its address listing with
		// another connection's is run again, not failed.
		dumpretry.NewServer(),
		recvfd.NewServer(),
		// A Close that recvfd has no descriptor for still reaches the
		// NSC's namespace (nscnetns.go).
		newNSCNetNS(),
		reap.NewServer(),
		discover.NewServer(nsClient, nseClient),
		roundrobin.NewServer(),
	}
	servers = append(append(servers, ServerElements(cfg.Remote)...), connectNSE)
	f := &Forwarder{reaped: make(chan struct{})}
	f.Endpoint = endpoint.NewServer(ctx, cfg.TokenGenerator,
		endpoint.WithName(cfg.Name),
		endpoint.WithAdditionalFunctionality(servers...),
	)
	go func() {
		defer close(f.reaped)
		if cfg.ReapInterval > 0 {
			reap.Run(ctx, cfg.ReapInterval)
		}
	}()
	return f, nil
}

// Wait returns once the forwarder's own goroutine has ended, which it does
// when the context New was given ends.
func (f *Forwarder) Wait() { <-f.reaped }

// ServerElements are the forwarder's own server-side elements, which follow
// discovery and endpoint selection: mechanisms{KERNEL: accept as is; VXLAN,
// when r is enabled: SDK's vni server}, connectioncontextkernel (programs a
// KERNEL NSC end), stash (remembers the NSC end, kernel or VXLAN, for the
// client side), requestScope (marks the Request for the client side: a
// Close within it moves the connection, move.go).
func ServerElements(r Remote) []networkservice.NetworkServiceServer {
	accepted := map[string]networkservice.NetworkServiceServer{kernelmech.MECHANISM: null.NewServer()}
	if r.enabled() {
		accepted[vxlanmech.MECHANISM] = r.acceptServer()
	}
	return []networkservice.NetworkServiceServer{
		mechanisms.NewServer(accepted),
		connectioncontextkernel.NewServer(),
		stashServer{},
		requestScope{},
	}
}

// ClientElements are the forwarder's own client-side elements, which follow
// mechanism translation: the offers (KERNEL, class LOCAL; VXLAN, class
// REMOTE, with this node's end, when r is enabled), filtermechanisms (keeps
// LOCAL toward a unix socket, the NSMgr's own endpoints, and REMOTE toward
// another node's NSMgr, as NSM's forwarders do), connectioncontextkernel
// (programs a KERNEL NSE end), veth (joins two namespaces of this node),
// vxlan (puts a tunnel's device into this node's namespace), the reaper's
// client element (records the endpoint's namespace), recvfd.
// A test's NSM sandbox builds its forwarder from ServerElements and these.
func ClientElements(r Remote) []networkservice.NetworkServiceClient {
	elements := append([]networkservice.NetworkServiceClient{kernel.NewClient()}, r.offerClients()...)
	return append(elements,
		filtermechanisms.NewClient(),
		connectioncontextkernel.NewClient(),
		newVethClient(),
		newVXLANClient(r.NodeNetNS),
		reaper.NewClient(),
		recvfd.NewClient(),
	)
}
