package lbstub_test

import (
	"context"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"

	"github.com/networkservicemesh/sdk/pkg/networkservice/common/retry"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/lab/labtest"
	"github.com/causeway-net/causeway/pkg/lab/lbstub"
	"github.com/causeway-net/causeway/pkg/lab/targetaddrs"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
)

// TestLBStubAsProcess runs the LB stub the way the lab does: as its own
// process started with `ip netns exec`, naming its namespace through
// /proc/thread-self and passing it to the forwarder by file descriptor.
func TestLBStubAsProcess(t *testing.T) {
	bed := labtest.NewBed(t, "lbp", controlplane.Config{})
	ctx, cp, lbNS, prxNS := bed.Ctx, bed.CP, bed.Stub, bed.Proxy
	targets := filepath.Join(bed.Dir, "targets")

	child := labtest.StartChild(t, lbNS, lbstub.Config{
		Name: "lb-p", NSMgrURL: cp.NSMgrURL, Service: "c.t.ns", SocketPath: filepath.Join(bed.Dir, "lb-p.sock"),
		VIPs: []netip.Addr{netip.MustParseAddr("20.0.0.1")}, TargetsDir: targets,
	})

	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	proxy, conn := connectProxy(ctx, t, pctx, cp.NSMgrURL, prxNS)
	require.Eventually(t, func() bool {
		_, err := prxNS.Exec("ping", "-c1", "-W1", "172.16.1.3")
		return err == nil
	}, 20*time.Second, 200*time.Millisecond, "the LB process's end of the veth answers")

	require.NoError(t, targetaddrs.Publish(targets, "t1", []netip.Addr{netip.MustParseAddr("172.16.1.10")}))
	require.Eventually(t, func() bool { return slices.Equal(vipGateways(t, lbNS), []string{"172.16.1.10"}) },
		20*time.Second, 100*time.Millisecond, "the LB process routes the VIP to the target")

	// A graceful stop removes the stub's routes.
	require.NoError(t, child.Signal(syscall.SIGTERM))
	require.NoError(t, child.Wait(t))
	require.Empty(t, vipGateways(t, lbNS))

	_, err := proxy.Close(ctx, conn)
	require.NoError(t, err)
	pcancel()
	cp.Stop()
}

// connectProxy plays the proxy: an NSC of the conduit's service that
// assigns both ends' addresses, retrying until the LB is registered.
func connectProxy(ctx context.Context, t *testing.T, life context.Context, nsmgrURL *url.URL, ns *testutil.NetNS) (networkservice.NetworkServiceClient, *networkservice.Connection) {
	t.Helper()
	proxy := retry.NewClient(
		controlplane.NewClient(life, controlplane.ClientConfig{Name: "proxy", NSMgrURL: nsmgrURL, InterfaceName: "lb-p", NetNSPath: ns.Path()}),
		retry.WithTryTimeout(10*time.Second), retry.WithInterval(200*time.Millisecond))
	conn, err := proxy.Request(ctx, &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{
		Id: "proxy-lb-p", NetworkService: "c.t.ns",
		Context: &networkservice.ConnectionContext{IpContext: &networkservice.IPContext{
			SrcIpAddrs: []string{"172.16.1.2/24"}, DstIpAddrs: []string{"172.16.1.3/24"},
		}},
	}})
	require.NoError(t, err)
	return proxy, conn
}

// TestLBStubKilled kills the LB process as a pod would die: once its
// registration expires the control plane closes the connection and the
// forwarder removes the veth on the proxy's side.
func TestLBStubKilled(t *testing.T) {
	bed := labtest.NewBed(t, "lbk", controlplane.Config{NSEExpiration: 3 * time.Second})
	ctx, cp, lbNS, prxNS := bed.Ctx, bed.CP, bed.Stub, bed.Proxy
	child := labtest.StartChild(t, lbNS, lbstub.Config{
		Name: "lb-k", NSMgrURL: cp.NSMgrURL, Service: "c.t.ns", SocketPath: filepath.Join(bed.Dir, "lb-k.sock"),
		TargetsDir: filepath.Join(bed.Dir, "targets"),
	})
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	_, _ = connectProxy(ctx, t, pctx, cp.NSMgrURL, prxNS)
	_, err := prxNS.Exec("ip", "link", "show", "lb-p")
	require.NoError(t, err)

	require.NoError(t, child.Signal(syscall.SIGKILL))
	_ = child.Wait(t)
	require.Eventually(t, func() bool {
		_, err := prxNS.Exec("ip", "link", "show", "lb-p")
		return err != nil
	}, time.Minute, 200*time.Millisecond, "the dead LB's veth must go")
	pcancel()
	cp.Stop()
}
