// Command nsm-registry is the test cluster's NSM registry: the SDK's memory
// registry (cmd-registry-k8s cannot be built here: docs/kubernetes.md),
// served with SPIFFE mTLS on NSM_LISTEN_ON (default :5002).
package main

import (
	"context"
	"os"

	"github.com/networkservicemesh/sdk/pkg/registry/chains/memory"
	"google.golang.org/grpc"

	"github.com/causeway-net/causeway/test/kube/nsmpod"
)

func main() {
	os.Exit(nsmpod.Run("nsm-registry", func(ctx context.Context, p *nsmpod.Pod) error {
		reg := memory.NewServer(ctx, p.Creds.TokenGenerator(), memory.WithDialOptions(p.Creds.NSMDialOptions()...))
		return p.Serve("tcp", nsmpod.Env("NSM_LISTEN_ON", ":5002"), func(s *grpc.Server) { reg.Register(s) })
	}))
}
