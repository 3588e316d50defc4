package fullmesh_test

import (
	"context"
	"log/slog"
	"net/url"
	"time"

	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/client"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/heal"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/sendfd"
	registryclient "github.com/networkservicemesh/sdk/pkg/registry/chains/client"

	"github.com/causeway-net/causeway/pkg/nsm/chain/connlink"
	"github.com/causeway-net/causeway/pkg/nsm/chain/egress"
	"github.com/causeway-net/causeway/pkg/nsm/chain/ipcontext"
	"github.com/causeway-net/causeway/pkg/nsm/chain/mtu"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
	"github.com/causeway-net/causeway/pkg/nsm/fullmesh"
)

// Example shows how the proxy wires its full mesh toward the load
// balancers: the NSM client chain with the proxy's elements, the registry
// watch through the NSMgr, and the mesh itself, run until ctx ends.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		nsmgr   = &url.URL{Scheme: "unix", Path: "/var/lib/networkservicemesh/nsm.io.sock"}
		setter  ipcontext.Setter        // the *proxy.Proxy
		monitor *connlink.Matcher       // shared with the endpoint's chain
		report  = func(serving bool) {} // the Egress health service
	)
	creds := credentials.Insecure(slog.Default(), 10*time.Minute) // or FromWorkloadAPI

	pinner := fullmesh.NewPinner()
	nsc := client.NewClient(ctx,
		client.WithClientURL(nsmgr),
		client.WithName("proxy-a"),
		client.WithDialOptions(creds.NSMDialOptions()...),
		client.WithDialTimeout(5*time.Second),
		client.WithAuthorizeClient(creds.AuthorizeClient()),
		client.WithHealClient(heal.NewClient(ctx)),
		client.WithAdditionalFunctionality(
			kernel.NewClient(),
			// Before ipcontext, so that on Close the interface (and its
			// nexthop) is withdrawn before the addresses are released.
			connlink.NewClient(monitor),
			ipcontext.NewClient(setter),
			mtu.NewClient(mtu.WithMTU(1500)),
			egress.NewClient(report),
			pinner,
			sendfd.NewClient(),
		),
	)
	registry := registryclient.NewNetworkServiceEndpointRegistryClient(ctx,
		registryclient.WithClientURL(nsmgr),
		registryclient.WithDialOptions(creds.NSMDialOptions()...))
	mesh := fullmesh.New("proxy-a", "conduit-a.trench-a.ns", nsc, registry,
		fullmesh.WithPinner(pinner),
		fullmesh.WithRequestTimeout(15*time.Second),
	)
	_ = mesh.Run // go mesh.Run(ctx); cancel and wait for Run to return on shutdown
}
