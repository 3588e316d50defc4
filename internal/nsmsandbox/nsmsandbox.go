// Package nsmsandbox is test support for the NSM packages and the proxy daemon: an in-process
// NSM domain (the SDK sandbox: registry, NSMgr and a forwarder that offers
// and selects the kernel mechanism) and a switch for the SDK's very verbose
// logging. Test binaries only: the sandbox imports testing.
package nsmsandbox

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
type Option func(*sandbox.Builder) *sandbox.Builder

// WithUnixSockets serves every component on a unix socket (the NSMgr then
// keeps the registry itself), so that file descriptors can be passed as in
// a real deployment.
func WithUnixSockets() Option {
	return func(b *sandbox.Builder) *sandbox.Builder { return b.UseUnixSockets() }
}

// WithRegistryExpiration sets the registry's default registration lifetime
// (the sandbox default is one minute).
func WithRegistryExpiration(d time.Duration) Option {
	return func(b *sandbox.Builder) *sandbox.Builder { return b.SetRegistryDefaultExpiration(d) }
}

// NewDomain builds a one-node sandbox whose forwarder speaks the kernel
// mechanism on both sides (the default fake forwarder offers none, and an
// endpoint that requires one would never be reached).
func NewDomain(ctx context.Context, t *testing.T, opts ...Option) *sandbox.Domain {
	t.Helper()
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
				sandbox.WithForwarderAdditionalFunctionalityClient(kernel.NewClient()),
				sandbox.WithForwarderAdditionalFunctionalityServer(mechanisms.NewServer(
					map[string]networkservice.NetworkServiceServer{kernelmech.MECHANISM: kernel.NewServer()},
				)),
			)
		})
	for _, opt := range opts {
		b = opt(b)
	}
	return b.Build()
}

// KernelServer is the mechanisms element an endpoint under test uses.
func KernelServer() networkservice.NetworkServiceServer {
	return mechanisms.NewServer(map[string]networkservice.NetworkServiceServer{kernelmech.MECHANISM: kernel.NewServer()})
}
