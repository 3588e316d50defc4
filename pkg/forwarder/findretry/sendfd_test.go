package findretry_test

import (
	"context"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edwarnicke/grpcfd"
	"github.com/networkservicemesh/api/pkg/api/registry"
	registryclient "github.com/networkservicemesh/sdk/pkg/registry/chains/client"
	"github.com/networkservicemesh/sdk/pkg/registry/common/memory"
	registryrecvfd "github.com/networkservicemesh/sdk/pkg/registry/common/recvfd"
	registrysendfd "github.com/networkservicemesh/sdk/pkg/registry/common/sendfd"
	"github.com/networkservicemesh/sdk/pkg/registry/core/chain"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/causeway-net/causeway/pkg/forwarder/findretry"
)

// fdRegistry serves the SDK's memory registry behind its sendfd element on
// a unix socket, as the NSMgr does, with one endpoint reached over a unix
// socket: every listing passes that socket's descriptor with grpcfd.
func fdRegistry(t *testing.T) *url.URL {
	t.Helper()
	dir := t.TempDir()
	nseSock, err := net.Listen("unix", filepath.Join(dir, "nse.sock"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = nseSock.Close() })

	nses := chain.NewNetworkServiceEndpointRegistryServer(registrysendfd.NewNetworkServiceEndpointRegistryServer(),
		memory.NewNetworkServiceEndpointRegistryServer())
	_, err = nses.Register(context.Background(), &registry.NetworkServiceEndpoint{
		Name: "proxy-a", NetworkServiceNames: []string{"svc"}, Url: "unix://" + nseSock.Addr().String(),
	})
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.Creds(grpcfd.TransportCredentials(insecure.NewCredentials())))
	registry.RegisterNetworkServiceEndpointRegistryServer(srv, nses)
	l, err := net.Listen("unix", filepath.Join(dir, "registry.sock"))
	require.NoError(t, err)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return &url.URL{Scheme: "unix", Path: l.Addr().String()}
}

// fdClient is the registry client a forwarder's discover uses: the SDK's
// chain with recvfd, so endpoint URLs come back as local descriptors.
func fdClient(ctx context.Context, u *url.URL) registry.NetworkServiceEndpointRegistryClient {
	return registryclient.NewNetworkServiceEndpointRegistryClient(ctx,
		registryclient.WithClientURL(u),
		registryclient.WithDialTimeout(5*time.Second),
		registryclient.WithDialOptions(
			grpc.WithTransportCredentials(grpcfd.TransportCredentials(insecure.NewCredentials())),
			grpcfd.WithChainStreamInterceptor(), grpcfd.WithChainUnaryInterceptor()),
		registryclient.WithNSEAdditionalFunctionality(registryrecvfd.NewNetworkServiceEndpointRegistryClient()))
}

// listings runs n listings from 4 goroutines and counts those without the
// endpoint, and those that listed it at its own URL instead of a received
// descriptor (the race can also leave an answer untranslated, without an
// error: nothing a listing can tell from a complete answer, so findretry
// does not list again for it; the endpoint is still listed, at an address
// that works where its socket is visible).
func listings(c registry.NetworkServiceEndpointRegistryClient, n int) (missed, undescribed int) {
	var missing, plain atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n / 4 {
				names, urls := listOnce(c)
				switch {
				case len(names) == 0:
					missing.Add(1)
				case len(urls) != 1 || !strings.HasPrefix(urls[0], "unix:///proc/"):
					plain.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(missing.Load()), int(plain.Load())
}

func listOnce(c registry.NetworkServiceEndpointRegistryClient) (names, urls []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.Find(ctx, &registry.NetworkServiceEndpointQuery{NetworkServiceEndpoint: &registry.NetworkServiceEndpoint{NetworkServiceNames: []string{"svc"}}})
	if err != nil {
		return nil, nil
	}
	for _, nse := range registry.ReadNetworkServiceEndpointList(s) {
		names, urls = append(names, nse.GetName()), append(urls, nse.GetUrl())
	}
	return names, urls
}

// Through the real registry sendfd and grpcfd: a listing the race broke
// reads as empty without the element (reported, it depends on timing), and
// never with it.
func TestListingsThroughDescriptorPassing(t *testing.T) {
	u := fdRegistry(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 400

	start := time.Now()
	missedPlain, undescribedPlain := listings(fdClient(ctx, u), n)
	plain := time.Since(start)

	var retried atomic.Int32
	wrapped := chain.NewNetworkServiceEndpointRegistryClient(
		findretry.NewNetworkServiceEndpointRegistryClient(findretry.WithRetried(func(error) { retried.Add(1) })),
		fdClient(ctx, u))
	start = time.Now()
	missed, undescribed := listings(wrapped, n)
	require.Zero(t, missed, "every listing has the endpoint")
	t.Logf("FIGURE: %d listings over grpcfd: without findretry %d without the endpoint, %d at its own URL (%s); with it none without, %d at its own URL, %d listed again (%s)",
		n, missedPlain, undescribedPlain, plain, undescribed, retried.Load(), time.Since(start))
}
