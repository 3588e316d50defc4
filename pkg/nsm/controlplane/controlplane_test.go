package controlplane_test

import (
	"context"
	"net"
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

// addrsIn lists the global unicast addresses, of both families, of the
// link called name in ns; the test fails when there is no such link.
func addrsIn(t *testing.T, ns *testutil.NetNS, name string) []string {
	t.Helper()
	out, err := globalAddrsIn(ns, name)
	require.NoError(t, err)
	return out
}

// globalAddrsIn is addrsIn with an error instead of a failure (for a
// condition polled while the link may come and go).
func globalAddrsIn(ns *testutil.NetNS, name string) ([]string, error) {
	h, err := netlink.NewHandleAt(ns.Handle)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return nil, err
	}
	addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range addrs {
		if a.IP.IsGlobalUnicast() {
			out = append(out, a.IPNet.String())
		}
	}
	return out, nil
}

// TestVethForwarderKernelE2E runs the real control plane, an NSE in one
// namespace and an NSC in another: the forwarder must join them with a veth
// carrying the IP context, keep it on refresh and remove it on Close.
func TestVethForwarderKernelE2E(t *testing.T) {
	nscNS := testutil.NewNetNS(t, "nsc")
	nseNS := testutil.NewNetNS(t, "nse")
	n := startPair(t, nscNS, nseNS, 2*time.Minute)
	ctx, nsc := n.ctx, n.nsc
	conn := n.request(t)
	require.Equal(t, "nsm0", conn.GetMechanism().GetParameters()["name"])

	nscLink, err := linkIn(t, nscNS, "nsm0")
	require.NoError(t, err, "veth end in the NSC namespace")
	require.Equal(t, "veth", nscLink.Type())
	require.Equal(t, 1400, nscLink.Attrs().MTU)
	require.Contains(t, addrsIn(t, nscNS, "nsm0"), "10.80.0.2/24")

	// The NSE end: the one veth in the NSE namespace, with the Dst address.
	nseName := theVeth(t, nseNS)
	require.Contains(t, addrsIn(t, nseNS, nseName), "10.80.0.1/24")

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
	reqCtx, reqCancel := context.WithTimeout(ctx, time.Minute)
	conn, err = nsc.Request(reqCtx, &networkservice.NetworkServiceRequest{Connection: conn.Clone()})
	reqCancel()
	require.NoError(t, err)
	again, err := linkIn(t, nscNS, "nsm0")
	require.NoError(t, err)
	require.Equal(t, nscLink.Attrs().Index, again.Attrs().Index, "refresh must keep the veth")
	require.Contains(t, addrsIn(t, nscNS, "nsm0"), "10.80.0.2/24")

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
	conn := n.request(t)
	fresh, err := linkIn(t, nscNS, "nsm0")
	require.NoError(t, err)
	require.NotEqual(t, stale.Attrs().Index, fresh.Attrs().Index, "the leftover must be replaced")
	_, err = linkIn(t, nscNS, "stale0")
	require.Error(t, err, "the leftover's peer went with it")
	require.Eventually(t, func() bool {
		_, err := nscNS.Exec("ping", "-c1", "-W1", "10.80.0.1")
		return err == nil
	}, 20*time.Second, 200*time.Millisecond)
	_, err = n.nsc.Close(n.ctx, conn)
	require.NoError(t, err)
}
