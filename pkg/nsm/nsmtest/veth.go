package nsmtest

import (
	"context"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/nsmgr"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/recvfd"
	"github.com/networkservicemesh/sdk/pkg/tools/sandbox"

	"github.com/causeway-net/causeway/pkg/forwarder"
	"github.com/causeway-net/causeway/pkg/forwarder/dumpretry"
)

// NewVethDomain builds a one-node sandbox on unix sockets whose forwarder
// is Causeway's veth forwarder (pkg/forwarder): it really connects the two
// sides with a veth pair, one end in the client's namespace and the other in
// the endpoint's (named and placed as the kernel mechanisms say), and
// programs the IP context on both ends with sdk-kernel. Needs root.
func NewVethDomain(ctx context.Context, t *testing.T) *sandbox.Domain {
	t.Helper()
	servers := append([]networkservice.NetworkServiceServer{
		dumpretry.NewServer(), // an interrupted netlink dump is retried, not failed
		recvfd.NewServer(),
	}, forwarder.ServerElements(forwarder.Remote{})...)
	return sandbox.NewBuilder(ctx, t).
		UseUnixSockets().
		SetNodeSetup(func(ctx context.Context, node *sandbox.Node, _ int) {
			node.NewNSMgr(ctx, sandbox.UniqueName("nsmgr"), nil, sandbox.GenerateTestToken, nsmgr.NewServer)
			node.NewForwarder(ctx, &registryapi.NetworkServiceEndpoint{
				Name:                sandbox.UniqueName("vethfwd"),
				NetworkServiceNames: []string{forwarder.ServiceName},
				NetworkServiceLabels: map[string]*registryapi.NetworkServiceLabels{
					forwarder.ServiceName: {Labels: map[string]string{"p2p": "true"}},
				},
			}, sandbox.GenerateTestToken,
				sandbox.WithForwarderAdditionalFunctionalityServer(servers...),
				sandbox.WithForwarderAdditionalFunctionalityClient(forwarder.ClientElements(forwarder.Remote{})...),
			)
		}).
		Build()
}
