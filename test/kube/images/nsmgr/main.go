// Command nsmgr is the test cluster's NSMgr: the SDK's nsmgr chain at NSM's
// release (cmd-nsmgr is not served as a module), one per node. Clients and
// endpoints of the node reach it on its unix socket (NSM_SOCKET, default
// /var/lib/networkservicemesh/nsm.io.sock); the registry and other NSMgrs
// on NSM_URL (tcp://<pod address>:5001). NSM_REGISTRY_URL is the registry.
package main

import (
	"context"
	"fmt"
	"net/url"
	"os"

	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/nsmgr"
	"google.golang.org/grpc"

	"github.com/causeway-net/causeway/test/kube/nsmpod"
)

func main() {
	os.Exit(nsmpod.Run("nsmgr", func(ctx context.Context, p *nsmpod.Pod) error {
		own, err := url.Parse(os.Getenv("NSM_URL"))
		if err != nil || own.Host == "" {
			return fmt.Errorf("NSM_URL %q: want tcp://<address>:<port>", os.Getenv("NSM_URL"))
		}
		reg, err := url.Parse(nsmpod.Env("NSM_REGISTRY_URL", "tcp://nsm-registry.nsm-system.svc.cluster.local:5002"))
		if err != nil {
			return fmt.Errorf("NSM_REGISTRY_URL: %w", err)
		}
		mgr := nsmgr.NewServer(ctx, p.Creds.TokenGenerator(),
			nsmgr.WithName(nsmpod.Env("NSM_NAME", "nsmgr")),
			nsmgr.WithURL(own.String()),
			nsmgr.WithRegistry(reg),
			nsmgr.WithAuthorizeServer(p.Creds.AuthorizeServer()),
			nsmgr.WithDialOptions(p.Creds.NSMDialOptions()...),
		)
		register := func(s *grpc.Server) { mgr.Register(s) }
		if err := p.Serve("unix", nsmpod.Env("NSM_SOCKET", "/var/lib/networkservicemesh/nsm.io.sock"), register); err != nil {
			return err
		}
		return p.Serve("tcp", own.Host, register)
	}))
}
