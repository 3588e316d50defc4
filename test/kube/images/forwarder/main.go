// Command forwarder is the test cluster's NSM forwarder: the project's veth
// forwarder (pkg/forwarder) (neither VPP nor Open vSwitch's kernel module exists here), one
// per node, served on NSM_SOCKET (default
// /var/lib/networkservicemesh/forwarder.sock) and registered with the
// node's NSMgr at NSM_CONNECT_TO. It reaches the clients' and endpoints'
// network namespaces through the file descriptors NSM passes (privileged pod).
package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/networkservicemesh/api/pkg/api/registry"
	registryrecvfd "github.com/networkservicemesh/sdk/pkg/registry/common/recvfd"

	"github.com/causeway-net/causeway/pkg/forwarder"
	"github.com/causeway-net/causeway/pkg/nsm/registration"
	"github.com/causeway-net/causeway/test/kube/nsmpod"
)

func main() {
	os.Exit(nsmpod.Run("forwarder", func(ctx context.Context, p *nsmpod.Pod) error {
		name := nsmpod.Env("NSM_NAME", "forwarder")
		mgr, err := url.Parse(nsmpod.Env("NSM_CONNECT_TO", "unix:///var/lib/networkservicemesh/nsm.io.sock"))
		if err != nil {
			return fmt.Errorf("NSM_CONNECT_TO: %w", err)
		}
		dial := p.Creds.NSMDialOptions()
		fwd, err := forwarder.New(ctx, forwarder.Config{Name: name, NSMgrURL: mgr, DialOptions: dial, TokenGenerator: p.Creds.TokenGenerator()})
		if err != nil {
			return err
		}
		sock := nsmpod.Env("NSM_SOCKET", "/var/lib/networkservicemesh/forwarder.sock")
		if err := p.Serve("unix", sock, fwd.Register); err != nil {
			return err
		}
		reg := registration.Clients(ctx, mgr, dial, 5*time.Second, registryrecvfd.NewNetworkServiceEndpointRegistryClient())
		k, err := registration.Start(ctx, reg, nil, &registry.NetworkServiceEndpoint{
			Name:                name,
			NetworkServiceNames: []string{forwarder.ServiceName},
			NetworkServiceLabels: map[string]*registry.NetworkServiceLabels{
				forwarder.ServiceName: {Labels: map[string]string{"p2p": "true"}},
			},
			Url: (&url.URL{Scheme: "unix", Path: sock}).String(),
		})
		if err != nil {
			return fmt.Errorf("register: %w", err)
		}
		p.OnStop(func(ctx context.Context) { _ = k.Stop(ctx) })
		return nil
	}))
}
