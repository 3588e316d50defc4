package controlplane

import (
	"context"
	"fmt"
	"time"

	"github.com/networkservicemesh/sdk/pkg/registry/chains/memory"
)

// StartRegistry serves the SDK's memory registry on the TCP address addr
// (host:port, port 0 for any) until Stop or until ctx ends (Stop must still
// be called): the registry that the NSMgrs of several nodes share, as
// NSM's registry-k8s is shared in a cluster. Registrations live expiration
// without a refresh (one minute when zero).
func StartRegistry(ctx context.Context, addr string, expiration time.Duration) (*Server, error) {
	if expiration <= 0 {
		expiration = time.Minute
	}
	gen := TokenGenerator("registry", 0)
	reg := memory.NewServer(ctx, gen,
		memory.WithDefaultExpiration(expiration),
		memory.WithDialOptions(DialOptions(gen)...))
	s, err := ServeTCP(addr, reg.Register)
	if err != nil {
		return nil, fmt.Errorf("serve registry: %w", err)
	}
	return s, nil
}
