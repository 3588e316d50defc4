// Package nsmtest is test support for the NSM packages and the proxy daemon: an in-process
// NSM domain (the SDK sandbox: registry, NSMgr and a forwarder that offers
// and selects the kernel mechanism), an endpoint element that keeps the
// connections it serves (Conns), and a switch for the SDK's very verbose
// logging. Test binaries only: the sandbox imports testing.
package nsmtest

import (
	"context"
	"io"
	stdlog "log"
	"os"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/nsmgr"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/tools/log"
	"github.com/networkservicemesh/sdk/pkg/tools/sandbox"
	"github.com/sirupsen/logrus"

	"github.com/causeway-net/causeway/pkg/forwarder"
)

// Quiet silences the SDK's logs (and the standard logger, which backs the
// default slog handler) unless CAUSEWAY_NSM_TEST_LOGS is set.
func Quiet() {
	log.EnableTracing(false)
	if os.Getenv("CAUSEWAY_NSM_TEST_LOGS") == "" {
		stdlog.SetOutput(io.Discard)
		logrus.SetOutput(io.Discard)
	}
}

// Option changes the domain.
type Option func(*options)

type options struct {
	unix       bool
	expiration time.Duration
	links      func(LinkChange)
}

// WithUnixSockets serves every component on a unix socket (the NSMgr then
// keeps the registry itself), so that file descriptors can be passed as in
// a real deployment.
func WithUnixSockets() Option { return func(o *options) { o.unix = true } }

// WithRegistryExpiration sets the registry's default registration lifetime
// (the sandbox default is one minute).
func WithRegistryExpiration(d time.Duration) Option { return func(o *options) { o.expiration = d } }

// WithLinkObserver makes the forwarder report the kernel interfaces a real
// forwarder would create and delete for each connection (see LinkChange),
// so that a test can play the kernel of the client or of the endpoint.
func WithLinkObserver(fn func(LinkChange)) Option { return func(o *options) { o.links = fn } }

// NewDomain builds a one-node sandbox whose forwarder speaks the kernel
// mechanism on both sides (the default fake forwarder offers none, and an
// endpoint that requires one would never be reached).
func NewDomain(ctx context.Context, t *testing.T, opts ...Option) *sandbox.Domain {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	server := []networkservice.NetworkServiceServer{mechanisms.NewServer(
		map[string]networkservice.NetworkServiceServer{kernelmech.MECHANISM: kernel.NewServer()},
	)}
	client := []networkservice.NetworkServiceClient{kernel.NewClient()}
	if o.links != nil {
		server = append(server, forwarder.NewStashServer())
		client = append(client, &linkObserver{report: o.links})
	}
	b := sandbox.NewBuilder(ctx, t).
		SetNodesCount(1).
		SetNSMgrProxySupplier(nil).
		SetRegistryProxySupplier(nil).
		SetNodeSetup(func(ctx context.Context, node *sandbox.Node, _ int) {
			node.NewNSMgr(ctx, sandbox.UniqueName("nsmgr"), nil, sandbox.GenerateTestToken, nsmgr.NewServer)
			node.NewForwarder(ctx, &registryapi.NetworkServiceEndpoint{
				Name:                sandbox.UniqueName("forwarder"),
				NetworkServiceNames: []string{"forwarder"},
				NetworkServiceLabels: map[string]*registryapi.NetworkServiceLabels{
					"forwarder": {Labels: map[string]string{"p2p": "true"}},
				},
			}, sandbox.GenerateTestToken,
				sandbox.WithForwarderAdditionalFunctionalityClient(client...),
				sandbox.WithForwarderAdditionalFunctionalityServer(server...),
			)
		})
	if o.unix {
		b = b.UseUnixSockets()
	}
	if o.expiration > 0 {
		b = b.SetRegistryDefaultExpiration(o.expiration)
	}
	return b.Build()
}

// KernelServer is the mechanisms element an endpoint under test uses.
func KernelServer() networkservice.NetworkServiceServer {
	return mechanisms.NewServer(map[string]networkservice.NetworkServiceServer{kernelmech.MECHANISM: kernel.NewServer()})
}
