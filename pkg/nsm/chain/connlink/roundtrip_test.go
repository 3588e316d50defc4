package connlink_test

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
	"github.com/causeway-net/causeway/pkg/nsm/chain/connlink"
	"github.com/causeway-net/causeway/pkg/nsm/chain/ipcontext"
	"github.com/causeway-net/causeway/pkg/proxy"
)

// The tests of this file follow a connection from its NSM request to the
// kernel without the round trips the proxy once made: the link matcher
// matches the dataplane's kernel links to connections, the proxy derives
// ports and nexthops from its own allocations, the dataplane writes them.

// roundTrip is a proxy on the real dataplane of a throw-away namespace and
// the real IPAM engine, with the NSM elements of both sides.
type roundTrip struct {
	ns      *testutil.NetNS
	dp      *dataplane.Dataplane
	calls   *countedDataplane // what the proxy and the matcher ask of dp
	engine  *ipam.Engine
	proxy   *proxy.Proxy
	matcher *connlink.Matcher
	lbs     networkservice.NetworkServiceClient
}

func newRoundTrip(t *testing.T, forwarder networkservice.NetworkServiceServer) (*roundTrip, networkservice.NetworkServiceServer) {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	r := &roundTrip{ns: testutil.NewNetNS(t, "imrt")}
	r.dp = kernelDataplane(t, r.ns)
	r.calls = &countedDataplane{dp: r.dp}
	var err error
	r.engine, err = ipam.New(context.Background(), memory.New(), ipam.Config{
		Trench: "trench-a",
		IPv4:   &ipam.FamilyConfig{Pool: netip.MustParsePrefix("172.16.0.0/16"), ConduitLength: 20, NodeLength: 24},
		IPv6:   &ipam.FamilyConfig{Pool: netip.MustParsePrefix("fd00::/48"), ConduitLength: 56, NodeLength: 64},
		Logger: quiet,
	})
	require.NoError(t, err)
	t.Cleanup(r.engine.Close)
	srv := testutil.ServeGRPC(t, "", func(s *grpc.Server) { ipamv1.RegisterIpamServer(s, ipam.NewServer(r.engine)) })
	r.proxy, err = proxy.New(context.Background(), proxy.Config{
		Conduit: "conduit-a", Trench: "trench-a", Node: "worker-1",
		IPAM: ipamv1.NewIpamClient(srv.Dial(t)), Dataplane: r.calls, RetryInterval: time.Millisecond, Logger: quiet,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.proxy.Close(context.Background())) })
	r.matcher = connlink.New(r.proxy, r.calls, connlink.WithLogger(quiet))
	runMatcher(t, r.matcher, r.dp)
	r.lbs = chain.NewNetworkServiceClient(metadata.NewClient(), connlink.NewClient(r.matcher, connlink.WithLogger(quiet)),
		ipcontext.NewClient(r.proxy, ipcontext.WithLogger(quiet)))
	targets := chain.NewNetworkServiceServer(metadata.NewServer(), connlink.NewServer(r.matcher, connlink.WithLogger(quiet)),
		ipcontext.NewServer(r.proxy, ipcontext.WithLogger(quiet)), forwarder)
	return r, targets
}

// eventually waits until the output of cmd in the namespace satisfies ok.
func (r *roundTrip) eventually(t *testing.T, what string, ok func(string) bool, cmd ...string) {
	t.Helper()
	var out string
	require.Eventually(t, func() bool {
		out, _ = r.ns.Exec(cmd...)
		return ok(out)
	}, 20*time.Second, 10*time.Millisecond, "%s; last output:\n%s", what, out)
}

func (r *roundTrip) veth(t *testing.T, name string) {
	t.Helper()
	r.ns.MustExec(t, "ip", "link", "add", name, "type", "veth", "peer", "name", name+"p")
	r.ns.MustExec(t, "ip", "link", "set", name, "up")
	r.ns.MustExec(t, "ip", "link", "set", name+"p", "up")
}

// lbAddrs are the LB's side of an LB connection (its IP context's Dst).
func lbAddrs(t *testing.T, conn *networkservice.Connection) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	for _, s := range conn.GetContext().GetIpContext().GetDstIpAddrs() {
		out = append(out, netip.MustParsePrefix(s).Addr())
	}
	require.Len(t, out, 2)
	return out
}

// routes lists the ECMP routes of both families.
var routes = []string{"sh", "-c", "ip -4 route show table 1; ip -6 route show table 1"}

// An LB's interface deleted in the kernel (its connection lives on)
// removes its nexthop; the heal check sees the link lost.
func TestKernelLBLinkDeletedRemovesNexthop(t *testing.T) {
	r, _ := newRoundTrip(t, nil)
	conn, err := r.lbs.Request(t.Context(), &networkservice.NetworkServiceRequest{Connection: kernelConn("lb-1", "nsm-lb1")})
	require.NoError(t, err)
	hops := lbAddrs(t, conn)
	r.veth(t, "nsm-lb1")
	r.eventually(t, "the LB's port and both nexthops", func(s string) bool {
		return strings.Contains(s, "master bridge0") && strings.Contains(s, "via "+hops[0].String()) &&
			strings.Contains(s, "via "+hops[1].String())
	}, "sh", "-c", "ip link show nsm-lb1; ip -4 route show table 1; ip -6 route show table 1")

	r.ns.MustExec(t, "ip", "link", "del", "nsm-lb1")
	r.eventually(t, "the nexthops removed", func(s string) bool {
		return !strings.Contains(s, hops[0].String()) && !strings.Contains(s, hops[1].String())
	}, routes...)
	require.True(t, r.matcher.Lost(proxy.LBConn, "lb-1"))
	require.Zero(t, r.proxy.Stats().Nexthops)
	require.Equal(t, 1, r.proxy.Stats().Connections, "the connection keeps its addresses")
}

// A refresh of an LB connection whose addresses the IPAM changed moves the
// nexthops to the new addresses, on the same port.
func TestKernelRefreshMovesNexthops(t *testing.T) {
	r, _ := newRoundTrip(t, nil)
	conn, err := r.lbs.Request(t.Context(), &networkservice.NetworkServiceRequest{Connection: kernelConn("lb-1", "nsm-lb1")})
	require.NoError(t, err)
	old := lbAddrs(t, conn)
	r.veth(t, "nsm-lb1")
	r.eventually(t, "the nexthop", func(s string) bool { return strings.Contains(s, "via "+old[0].String()) }, routes...)

	// The IPAM forgets the LB side's IPv4 address and gives it to another
	// child: the refresh gets another one.
	sub := ipam.Subnet{Trench: "trench-a", Conduit: "conduit-a", Node: "worker-1", Family: ipam.IPv4}
	require.NoError(t, r.engine.Release(t.Context(), sub, "lb-1-src"))
	_, err = r.engine.Allocate(t.Context(), sub, "squatter")
	require.NoError(t, err)
	conn, err = r.lbs.Request(t.Context(), &networkservice.NetworkServiceRequest{Connection: conn})
	require.NoError(t, err)
	moved := lbAddrs(t, conn)
	require.NotEqual(t, old[0], moved[0])
	require.Equal(t, old[1], moved[1])

	r.eventually(t, "the nexthop moved", func(s string) bool {
		return strings.Contains(s, "via "+moved[0].String()) && !strings.Contains(s, old[0].String()) &&
			strings.Contains(s, "via "+old[1].String())
	}, routes...)
	require.Contains(t, r.ns.MustExec(t, "ip", "link", "show", "nsm-lb1"), "master bridge0")
	require.Equal(t, 2, r.proxy.Stats().Nexthops)
}

// forwarderFunc is the end of the target chain: what the forwarder does
// before the Request returns to the proxy.
type forwarderFunc func(conn *networkservice.Connection)

func (f forwarderFunc) Request(ctx context.Context, req *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	f(req.GetConnection())
	return next.Server(ctx).Request(ctx, req)
}

func (f forwarderFunc) Close(ctx context.Context, conn *networkservice.Connection) (*emptypb.Empty, error) {
	return next.Server(ctx).Close(ctx, conn)
}

// A target's interface that appears in the kernel before the NSM request
// returns (the link event handled while no connection expects it) becomes
// a bridge port; the connection's close releases it.
func TestKernelTargetLinkBeforeRequestReturns(t *testing.T) {
	var r *roundTrip
	r, targets := newRoundTrip(t, forwarderFunc(func(*networkservice.Connection) {
		// The link is created, and its event delivered, before the
		// Request returns and the link matcher expects it.
		events, unsubscribe := r.dp.Subscribe()
		defer unsubscribe()
		r.veth(t, "nsm-t1")
		for ev := range events {
			if ev.Name == "nsm-t1" {
				break
			}
		}
	}))
	conn, err := targets.Request(t.Context(), &networkservice.NetworkServiceRequest{Connection: kernelConn("t1", "nsm-t1")})
	require.NoError(t, err)
	r.eventually(t, "the target's port", func(s string) bool { return strings.Contains(s, "master bridge0") },
		"ip", "link", "show", "nsm-t1")
	require.Equal(t, 1, r.proxy.Stats().Ports)

	_, err = targets.Close(t.Context(), conn)
	require.NoError(t, err)
	r.eventually(t, "the port released", func(s string) bool { return !strings.Contains(s, "master") && s != "" },
		"ip", "link", "show", "nsm-t1")
}

// A target that heals through another path (a new proxy-side connection
// id under the same key, a new interface) and whose old path is closed
// afterwards (its NSMgr's timeout, or the endpoint's expiry) keeps its new
// port and its addresses.
func TestKernelCloseOfASupersededTargetPath(t *testing.T) {
	r, targets := newRoundTrip(t, forwarderFunc(func(*networkservice.Connection) {}))
	old, err := targets.Request(t.Context(), &networkservice.NetworkServiceRequest{Connection: kernelConn("t1", "nsm-t1")})
	require.NoError(t, err)
	r.veth(t, "nsm-t1")
	r.eventually(t, "the old path's port", func(s string) bool { return strings.Contains(s, "master bridge0") },
		"ip", "link", "show", "nsm-t1")

	healed := kernelConn("t1-healed", "nsm-t2")
	healed.GetPath().GetPathSegments()[0].Id = old.GetPath().GetPathSegments()[0].GetId()
	healed.Context = proto.Clone(old.GetContext()).(*networkservice.ConnectionContext)
	healed, err = targets.Request(t.Context(), &networkservice.NetworkServiceRequest{Connection: healed})
	require.NoError(t, err)
	require.Equal(t, old.GetContext().GetIpContext().GetSrcIpAddrs(), healed.GetContext().GetIpContext().GetSrcIpAddrs())
	r.veth(t, "nsm-t2")
	r.eventually(t, "the healed path's port", func(s string) bool { return strings.Contains(s, "master bridge0") },
		"ip", "link", "show", "nsm-t2")

	r.ns.MustExec(t, "ip", "link", "del", "nsm-t1") // the old path's forwarder removes its end
	_, err = targets.Close(t.Context(), old)
	require.NoError(t, err)
	require.Zero(t, r.proxy.Stats().PendingReleases, "no release of the healed connection's addresses")
	require.Equal(t, 1, r.proxy.Stats().Ports)
	require.Contains(t, r.ns.MustExec(t, "ip", "link", "show", "nsm-t2"), "master bridge0")

	_, err = targets.Close(t.Context(), healed)
	require.NoError(t, err)
	require.Equal(t, 1, r.proxy.Stats().PendingReleases, "the healed connection's own close releases them")
	r.eventually(t, "its port released", func(s string) bool { return !strings.Contains(s, "master") && s != "" },
		"ip", "link", "show", "nsm-t2")
}
