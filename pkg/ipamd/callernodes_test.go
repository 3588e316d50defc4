package ipamd

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/testutil"
)

func nodeChild(node, name string) *ipamv1.Child {
	return &ipamv1.Child{Name: name, Subnet: &ipamv1.Subnet{
		Conduit: &nspv1.Conduit{Name: "lb", Trench: &nspv1.Trench{Name: "default"}}, Node: node}}
}

// TestProxyHeldToItsNode performs the attack of finding 5 on a running
// IPAM: the proxy of worker-a (its SVID names its node) asks for
// worker-b's subnet and releases worker-b's children. Both are refused with
// PermissionDenied before the engine sees them, counted and logged once;
// worker-b's child keeps its address (the next allocation does not hand it
// out twice). A caller whose ID names no node is refused too; the IPAM's
// own replicas (IPAM_UNBOUND_IDS) are not held.
func TestProxyHeldToItsNode(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "causeway.test")
	ipamSVID := ca.Mint(t, "/ns/cw/pod/ipam-0")
	cfg := testConfig(t)
	t.Setenv("SPIFFE_ENDPOINT_SOCKET", testutil.ServeWorkloadAPI(t, ipamSVID))
	cfg.Insecure = false
	cfg.AuthorizedIDs = []string{"/ns/cw/sa/proxy/node/*", "/ns/cw/sa/proxy", "/ns/cw/pod/ipam-[0-9]"}
	cfg.NodeBound = true
	cfg.UnboundIDs = []string{"/ns/cw/pod/ipam-[0-9]"}
	_, _, stop := start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	proxyA := mtlsClient(t, cfg, ca.Mint(t, "/ns/cw/sa/proxy/node/worker-a"), ipamSVID.SVID.ID)
	proxyB := mtlsClient(t, cfg, ca.Mint(t, "/ns/cw/sa/proxy/node/worker-b"), ipamSVID.SVID.ID)

	_, err := proxyA.Allocate(ctx, nodeChild("worker-a", "bridge"), grpc.WaitForReady(true))
	require.NoError(t, err)
	victim, err := proxyB.Allocate(ctx, nodeChild("worker-b", "t1-src"))
	require.NoError(t, err)

	for range 3 {
		_, err = proxyA.Allocate(ctx, nodeChild("worker-b", "x-src"))
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
		require.ErrorContains(t, err, `of node worker-a may not allocate nor release for node "worker-b"`)
		_, err = proxyA.Release(ctx, nodeChild("worker-b", "t1-src"))
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	}
	next, err := proxyB.Allocate(ctx, nodeChild("worker-b", "t2-src"))
	require.NoError(t, err)
	require.NotEqual(t, victim.GetAddress(), next.GetAddress(), "the victim's child was not released")
	again, err := proxyB.Allocate(ctx, nodeChild("worker-b", "t1-src"))
	require.NoError(t, err)
	require.Equal(t, victim.GetAddress(), again.GetAddress())

	noNode := mtlsClient(t, cfg, ca.Mint(t, "/ns/cw/sa/proxy"), ipamSVID.SVID.ID)
	_, err = noNode.Allocate(ctx, nodeChild("worker-a", "y-src"))
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.ErrorContains(t, err, "names no node")

	replica := mtlsClient(t, cfg, ca.Mint(t, "/ns/cw/pod/ipam-1"), ipamSVID.SVID.ID)
	_, err = replica.Allocate(ctx, nodeChild("worker-b", "t3-src"))
	require.NoError(t, err, "a replica forwarding for its caller is not held")

	metrics := scrape(t, cfg.MetricsPort)
	require.Contains(t, metrics, `causeway_ipam_node_refusals_total{limit="other_node"} 6`)
	require.Contains(t, metrics, `causeway_ipam_node_refusals_total{limit="no_node"} 1`)
	require.NoError(t, stop())
}
