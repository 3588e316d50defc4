package registryfake

import (
	"context"

	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"google.golang.org/grpc"
)

// Services is the registry's network service client; it implements
// Register only (Find and Unregister are not faked).
func (r *Registry) Services() registryapi.NetworkServiceRegistryClient { return services{r: r} }

type services struct {
	registryapi.NetworkServiceRegistryClient // Find and Unregister: not faked
	r                                        *Registry
}

func (s services) Register(_ context.Context, ns *registryapi.NetworkService, _ ...grpc.CallOption) (*registryapi.NetworkService, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	if s.r.down {
		return nil, ErrDown
	}
	s.r.services[ns.GetName()] = true
	return ns, nil
}
