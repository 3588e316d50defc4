//go:build apiserver

package ipamd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
)

// On the bbolt store too, IPAM_FREE_DELETED_NODES frees the subnet of a
// node deleted from the cluster once its lease ends (not at the
// collector's next run, an hour away here), and keeps it while the node
// is in the cluster.
func TestRunBoltFreesDeletedNodes(t *testing.T) {
	api := startAPI(t)
	cs, err := kubernetes.NewForConfig(api.Config)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	cfg := testConfig(t)
	cfg.FreeDeletedNodes, cfg.Kubeconfig = true, kubeconfig(t, api, api.Config.Host)
	cfg.GarbageCollectionInterval, cfg.GarbageCollectionThreshold, cfg.LeaseFlushInterval = time.Hour, 2*time.Second, time.Second
	client, _, stop := start(t, cfg)
	allocate(t, client, ipamv1.IPFamily_IPV4, "a")
	held := `causeway_ipam_nodes{conduit="a",family="ipv4",trench="default"} 1`
	require.Contains(t, scrape(t, cfg.MetricsPort), held)

	// Past its lease, the node still in the cluster keeps its subnet.
	time.Sleep(3 * cfg.GarbageCollectionThreshold)
	require.Contains(t, scrape(t, cfg.MetricsPort), held, "a node in the cluster keeps its subnet")

	require.NoError(t, cs.CoreV1().Nodes().Delete(ctx, "worker", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		return !strings.Contains(scrape(t, cfg.MetricsPort), held)
	}, waitFor, 50*time.Millisecond, "the deleted node's subnet freed")
	require.NoError(t, stop())
}
