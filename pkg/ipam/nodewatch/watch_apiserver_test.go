//go:build apiserver

package nodewatch

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/causeway-net/causeway/internal/apiservertest"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const threshold = 3 * time.Second

// A node deleted from a real API server has its subnets (and their
// addresses, the bridge's too) freed once their leases end, not before;
// a node still in the cluster keeps its subnet whatever its leases.
func TestDeletedNodeFreedAfterItsLeases(t *testing.T) {
	root, err := testutil.ModuleRoot()
	require.NoError(t, err)
	bin, etcd := apiservertest.Require(t, root)
	api := apiservertest.Start(t, bin, etcd)
	cs, err := kubernetes.NewForConfig(api.Config)
	require.NoError(t, err)
	ctx := context.Background()
	for _, n := range []string{"w1", "w2"} {
		_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	e, err := ipam.New(ctx, memory.New(), ipam.Config{
		Trench: "blue", IPv4: &ipam.FamilyConfig{Pool: netip.MustParsePrefix("172.16.0.0/16"), ConduitLength: 20, NodeLength: 24},
		GCInterval: time.Hour, GCThreshold: threshold, LeaseFlushInterval: time.Second, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	defer e.Close()
	sub := func(node string) ipam.Subnet {
		return ipam.Subnet{Trench: "blue", Conduit: "a", Node: node, Family: ipam.IPv4}
	}
	for _, n := range []string{"w1", "w2"} {
		_, err := e.Allocate(ctx, sub(n), ipam.BridgeChild)
		require.NoError(t, err)
	}
	// w1's last lease ends no earlier than this.
	leasedUntil := time.Now().Add(threshold)
	_, err = e.Allocate(ctx, sub("w1"), "target-a")
	require.NoError(t, err)

	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Resync an hour: the deletion and the lease's end drive the passes.
	w := &Watcher{Client: cs, Engine: e, Resync: time.Hour, Logger: slog.New(slog.DiscardHandler)}
	wg.Go(func() { w.Run(wctx) })
	defer func() { cancel(); wg.Wait() }()

	require.NoError(t, cs.CoreV1().Nodes().Delete(ctx, "w1", metav1.DeleteOptions{}))
	deleted := time.Now()
	for time.Now().Before(leasedUntil) {
		assert.Contains(t, e.NodeNames(), "w1", "freed before its leases ended")
		time.Sleep(50 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return !slices.Contains(e.NodeNames(), "w1") }, time.Minute, 20*time.Millisecond, "the deleted node's subnet is freed")
	assert.False(t, time.Now().Before(leasedUntil), "freed at or after the end of its leases")
	t.Logf("freed %s after the deletion, leases ending %s after it", time.Since(deleted).Round(time.Millisecond), leasedUntil.Sub(deleted).Round(time.Millisecond))

	// w2's lease ended long ago too, but w2 is in the cluster.
	assert.Contains(t, e.NodeNames(), "w2")
	p, err := e.Allocate(ctx, sub("w3"), ipam.BridgeChild)
	require.NoError(t, err)
	assert.Equal(t, "172.16.0.1/24", p.String(), "w1's freed subnet is reused")
}
