package controlplane_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"google.golang.org/protobuf/proto"

	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
)

// ipContextServer is a fake NSE element handing out a fixed IP context: its
// own, or by default one IPv4 address each side and a route.
type ipContextServer struct{ ipContext *networkservice.IPContext }

func (s ipContextServer) Request(ctx context.Context, r *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	c := r.GetConnection()
	if c.GetContext() == nil {
		c.Context = &networkservice.ConnectionContext{}
	}
	c.Context.MTU = 1400
	c.Context.IpContext = &networkservice.IPContext{
		SrcIpAddrs: []string{"10.80.0.2/24"},
		DstIpAddrs: []string{"10.80.0.1/24"},
		SrcRoutes:  []*networkservice.Route{{Prefix: "20.0.0.0/24", NextHop: "10.80.0.1"}},
	}
	if s.ipContext != nil {
		c.Context.IpContext = proto.Clone(s.ipContext).(*networkservice.IPContext)
	}
	return next.Server(ctx).Request(ctx, r)
}

func (ipContextServer) Close(ctx context.Context, c *networkservice.Connection) (*empty.Empty, error) {
	return next.Server(ctx).Close(ctx, c)
}

func linkIn(t *testing.T, ns *testutil.NetNS, name string) (netlink.Link, error) {
	t.Helper()
	h, err := netlink.NewHandleAt(ns.Handle)
	require.NoError(t, err)
	defer h.Close()
	return h.LinkByName(name)
}

func addrsOf(t *testing.T, ns *testutil.NetNS, name string) []string {
	t.Helper()
	h, err := netlink.NewHandleAt(ns.Handle)
	require.NoError(t, err)
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return nil
	}
	addrs, err := h.AddrList(l, netlink.FAMILY_V4)
	require.NoError(t, err)
	var out []string
	for _, a := range addrs {
		out = append(out, a.IPNet.String())
	}
	return out
}

// pairNode is one node's real control plane (the SDK's NSMgr and the
// project's forwarder) with an endpoint serving "svc" in an NSE namespace
// and a client ("nsc-1", interface nsm0) for an NSC namespace. Everything
// stops when the test ends; stopClient ends the client's chain earlier.
type pairNode struct {
	ctx        context.Context
	nsc        networkservice.NetworkServiceClient
	stopClient context.CancelFunc
}

func startPair(t *testing.T, nscNS, nseNS *testutil.NetNS, life time.Duration) *pairNode {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), life)
	t.Cleanup(cancel)
	cp, err := controlplane.Start(ctx, controlplane.Config{Dir: dir, Name: "t"})
	require.NoError(t, err)
	t.Cleanup(cp.Stop)
	nse, err := controlplane.StartEndpoint(ctx, controlplane.EndpointConfig{
		Name: "nse-1", Service: "svc", NSMgrURL: cp.NSMgrURL, SocketPath: filepath.Join(dir, "nse.sock"),
		NetNSPath: nseNS.Path(), Elements: []networkservice.NetworkServiceServer{ipContextServer{}},
	})
	require.NoError(t, err)
	t.Cleanup(nse.Stop)
	clientCtx, clientCancel := context.WithCancel(ctx)
	t.Cleanup(clientCancel)
	nsc := controlplane.NewClient(clientCtx, controlplane.ClientConfig{
		Name: "nsc-1", NSMgrURL: cp.NSMgrURL, InterfaceName: "nsm0", NetNSPath: nscNS.Path(),
	})
	return &pairNode{ctx: ctx, nsc: nsc, stopClient: clientCancel}
}

// TestVethForwarderKernelE2E runs the real control plane, an NSE in one
// namespace and an NSC in another: the forwarder must join them with a veth
// carrying the IP context, keep it on refresh and remove it on Close.
func TestVethForwarderKernelE2E(t *testing.T) {
	nscNS := testutil.NewNetNS(t, "nsc")
	nseNS := testutil.NewNetNS(t, "nse")
	n := startPair(t, nscNS, nseNS, 2*time.Minute)
	ctx, nsc := n.ctx, n.nsc
	reqCtx, reqCancel := context.WithTimeout(ctx, time.Minute)
	conn, err := nsc.Request(reqCtx, &networkservice.NetworkServiceRequest{
		Connection: &networkservice.Connection{Id: "nsc-1-conn", NetworkService: "svc"},
	})
	reqCancel()
	require.NoError(t, err)
	require.Equal(t, "nsm0", conn.GetMechanism().GetParameters()["name"])

	nscLink, err := linkIn(t, nscNS, "nsm0")
	require.NoError(t, err, "veth end in the NSC namespace")
	require.Equal(t, "veth", nscLink.Type())
	require.Equal(t, 1400, nscLink.Attrs().MTU)
	require.Contains(t, addrsOf(t, nscNS, "nsm0"), "10.80.0.2/24")

	// The NSE end: the one veth in the NSE namespace, with the Dst address.
	h, err := netlink.NewHandleAt(nseNS.Handle)
	require.NoError(t, err)
	defer h.Close()
	links, err := h.LinkList()
	require.NoError(t, err)
	var nseName string
	for _, l := range links {
		if l.Type() == "veth" {
			nseName = l.Attrs().Name
		}
	}
	require.NotEmpty(t, nseName)
	require.Contains(t, addrsOf(t, nseNS, nseName), "10.80.0.1/24")

	// The route the NSE asked for on the NSC side.
	nh, err := netlink.NewHandleAt(nscNS.Handle)
	require.NoError(t, err)
	defer nh.Close()
	_, dst, _ := net.ParseCIDR("20.0.0.0/24")
	routes, err := nh.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: dst}, netlink.RT_FILTER_DST)
	require.NoError(t, err)
	require.Len(t, routes, 1)
	require.Equal(t, "10.80.0.1", routes[0].Gw.String())

	if !assert.Eventually(t, func() bool {
		_, err := nscNS.Exec("ping", "-c1", "-W1", "10.80.0.1")
		return err == nil
	}, 20*time.Second, 200*time.Millisecond, "ping over the veth") {
		for _, ns := range []*testutil.NetNS{nscNS, nseNS} {
			out, _ := ns.Exec("sh", "-c", "ip -d addr; ip route; ip neigh; ip rule")
			t.Logf("%s:\n%s", ns.Name, out)
		}
		t.FailNow()
	}

	// Refresh: same pair, not recreated.
	reqCtx, reqCancel = context.WithTimeout(ctx, time.Minute)
	conn, err = nsc.Request(reqCtx, &networkservice.NetworkServiceRequest{Connection: conn.Clone()})
	reqCancel()
	require.NoError(t, err)
	again, err := linkIn(t, nscNS, "nsm0")
	require.NoError(t, err)
	require.Equal(t, nscLink.Attrs().Index, again.Attrs().Index, "refresh must keep the veth")
	require.Contains(t, addrsOf(t, nscNS, "nsm0"), "10.80.0.2/24")

	closeCtx, closeCancel := context.WithTimeout(ctx, time.Minute)
	_, err = nsc.Close(closeCtx, conn)
	closeCancel()
	require.NoError(t, err)
	_, err = linkIn(t, nscNS, "nsm0")
	require.Error(t, err, "Close must remove the NSC end")
	_, err = linkIn(t, nseNS, nseName)
	require.Error(t, err, "Close must remove the NSE end")
}

// TestVethForwarderReplacesLeftover: a veth left in the NSC namespace under
// the requested name (an earlier forwarder run died) is replaced, not reused
// and not fatal.
func TestVethForwarderReplacesLeftover(t *testing.T) {
	nscNS := testutil.NewNetNS(t, "nsc")
	nseNS := testutil.NewNetNS(t, "nse")
	nscNS.MustExec(t, "ip", "link", "add", "nsm0", "type", "veth", "peer", "name", "stale0")
	stale, err := linkIn(t, nscNS, "nsm0")
	require.NoError(t, err)
	n := startPair(t, nscNS, nseNS, 2*time.Minute)
	ctx, nsc := n.ctx, n.nsc
	conn, err := nsc.Request(ctx, &networkservice.NetworkServiceRequest{
		Connection: &networkservice.Connection{Id: "nsc-1-conn", NetworkService: "svc"},
	})
	require.NoError(t, err)
	fresh, err := linkIn(t, nscNS, "nsm0")
	require.NoError(t, err)
	require.NotEqual(t, stale.Attrs().Index, fresh.Attrs().Index, "the leftover must be replaced")
	_, err = linkIn(t, nscNS, "stale0")
	require.Error(t, err, "the leftover's peer went with it")
	require.Eventually(t, func() bool {
		_, err := nscNS.Exec("ping", "-c1", "-W1", "10.80.0.1")
		return err == nil
	}, 20*time.Second, 200*time.Millisecond)
	_, err = nsc.Close(ctx, conn)
	require.NoError(t, err)
}
