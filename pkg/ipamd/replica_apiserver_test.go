//go:build apiserver

package ipamd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/apiservertest"
	"github.com/causeway-net/causeway/internal/testutil"
)

// kubeconfig writes a kubeconfig file of the test's API server, reached at
// host (its own, or a proxy's).
func kubeconfig(t *testing.T, api *apiservertest.Server, host string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: test, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: test}}]
current-context: test
`, host, api.Config.BearerToken)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

type runningReplica struct {
	client ipamv1.IpamClient
	conn   *grpc.ClientConn
	stop   func() error
}

// serving reports whether the replica says ipam.v1.Ipam is SERVING (what
// readiness asks).
func (r runningReplica) serving(t *testing.T) bool {
	return r.healthy(t, "ipam.v1.Ipam")
}

// healthy reports whether the replica says service is SERVING.
func (r runningReplica) healthy(t *testing.T, service string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	// WaitForReady: the replica may not listen yet.
	hr, err := healthpb.NewHealthClient(r.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.WaitForReady(true))
	require.NoError(t, err)
	return hr.GetStatus() == healthpb.HealthCheckResponse_SERVING
}

// startAPI starts an API server with the IPAM's CRDs.
func startAPI(t *testing.T) *apiservertest.Server {
	t.Helper()
	root, err := testutil.ModuleRoot()
	require.NoError(t, err)
	bin, etcd := apiservertest.Require(t, root)
	api := apiservertest.Start(t, bin, etcd)
	api.InstallCRDs(filepath.Join(root, "deployments/helm/causeway/crds/ipam.causeway.net.yaml"))
	return api
}

// Two ipam processes on IPAM_STORE=kubernetes: one serves, the other
// refuses and says NOT_SERVING; when the serving one stops, the other
// serves the same addresses.
func TestRunReplicasOnKubernetesStore(t *testing.T) {
	api := startAPI(t)
	kc := kubeconfig(t, api, api.Config.Host)

	var rs []runningReplica
	var metrics []int
	for i := range 2 {
		cfg := testConfig(t)
		cfg.Store, cfg.Kubeconfig, cfg.KubeNamespace = StoreKubernetes, kc, "default"
		cfg.Identity, cfg.LeaderLeaseDuration = fmt.Sprintf("ipam-%d", i), 3*time.Second
		client, conn, stop := start(t, cfg)
		rs = append(rs, runningReplica{client, conn, stop})
		metrics = append(metrics, cfg.MetricsPort)
	}
	leader := waitServing(t, rs)
	other := rs[1-leader]
	// Both replicas' metrics say who serves.
	for i, port := range metrics {
		serving := map[bool]string{true: "1", false: "0"}[i == leader]
		want := []string{"causeway_ipam_serving " + serving, fmt.Sprintf(`causeway_ipam_leader{leader="ipam-%d"} 1`, leader)}
		require.Eventually(t, func() bool {
			m := scrape(t, port)
			return strings.Contains(m, want[0]) && strings.Contains(m, want[1])
		}, waitFor, 20*time.Millisecond, "replica %d: %v", i, want)
	}
	addr := allocate(t, rs[leader].client, ipamv1.IPFamily_IPV4, "a")
	assert.False(t, other.serving(t))
	_, err := other.client.Allocate(context.Background(), &ipamv1.Child{Name: "bridge", Subnet: &ipamv1.Subnet{
		Conduit: &nspv1.Conduit{Name: "a", Trench: &nspv1.Trench{Name: "default"}}, Node: "worker", IpFamily: ipamv1.IPFamily_IPV4,
	}})
	require.ErrorContains(t, err, "does not serve now", "the standby refuses")

	start := time.Now()
	require.NoError(t, rs[leader].stop())
	waitServing(t, []runningReplica{other})
	assert.Equal(t, addr, allocate(t, other.client, ipamv1.IPFamily_IPV4, "a"), "the same address from the next replica")
	fmt.Printf("FIGURE: IPAM handover, serving replica stopped cleanly (Lease released): %s to serving again\n", time.Since(start).Round(time.Millisecond))
	require.NoError(t, other.stop())
}

// waitServing returns the index of the replica that serves (a minute
// guards against none ever).
func waitServing(t *testing.T, rs []runningReplica) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for i, r := range rs {
			if r.serving(t) {
				return i
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no replica serves")
	return -1
}
