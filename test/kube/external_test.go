package kube_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// The external host's addresses (on its loopback, the source of every flow)
// and the links to the LBs: LB i is 10.98.i.1 and fd98:0:0:i::1 on its link
// "ext0", the external host 10.98.i.2 and fd98:0:0:i::2 on "lb<i>".
var (
	extAddrs  = map[bool]netip.Addr{false: netip.MustParseAddr("10.99.0.1"), true: netip.MustParseAddr("fd99::1")}
	lbExtLink = "ext0"
)

// extLink is the external host's link to LB i.
func extLink(i int) string { return fmt.Sprintf("lb%d", i) }

// linkAddrs are the addresses of the LB's end (1) or the external host's
// end (2) of the link to LB i.
func linkAddrs(i, end int) []netip.Prefix {
	return []netip.Prefix{
		netip.MustParsePrefix(fmt.Sprintf("10.98.%d.%d/24", i, end)),
		netip.MustParsePrefix(fmt.Sprintf("fd98:0:0:%d::%d/64", i, end)),
	}
}

// external is the network outside the cluster: a namespace of the host
// with a veth into each LB pod's namespace and multipath routes to the VIPs
// via the LBs, as a router in front of the LBs would have. The LBs route
// the replies back to it through their link.
type external struct {
	ns  *testutil.NetNS
	lbs []*corev1.Pod
}

// connectExternal makes the external namespace (removed when t ends) and
// links it to lbs; a link goes with its LB pod's namespace.
func (c *cluster) connectExternal(ctx context.Context, t *testing.T, lbs []*corev1.Pod) *external {
	t.Helper()
	ext := &external{ns: testutil.NewNetNS(t, "ext"), lbs: lbs}
	if err := topo.ApplySysctls(ext.ns.Path(), topo.RouterSysctls); err != nil {
		t.Fatal(err)
	}
	for _, a := range extAddrs {
		ext.ns.MustExec(t, "ip", "addr", "add", netip.PrefixFrom(a, a.BitLen()).String(), "dev", "lo")
	}
	c.linkExternal(ctx, t, ext.ns.Path(), lbs, 0, stubVIPs())
	return ext
}

// linkExternal links the external namespace at path to lbs, LB j of them
// as LB first+j (its link and addresses), and routes vips via them.
func (c *cluster) linkExternal(ctx context.Context, t *testing.T, path string, lbs []*corev1.Pod, first int, vips []netip.Addr) {
	t.Helper()
	gws := map[bool][]netip.Addr{}
	for j, lb := range lbs {
		i := first + j
		lbPath := c.podNetNS(ctx, t, lb, "stub")
		if err := topo.AddVeth(
			topo.VethEnd{NetNSPath: lbPath, Name: lbExtLink, Addrs: linkAddrs(i, 1)},
			topo.VethEnd{NetNSPath: path, Name: extLink(i), Addrs: linkAddrs(i, 2)}); err != nil {
			t.Fatalf("link to %s: %v", lb.Name, err)
		}
		for _, p := range linkAddrs(i, 2) {
			a := extAddrs[p.Addr().Is6()]
			if err := topo.AddRoute(lbPath, netip.PrefixFrom(a, a.BitLen()), p.Addr()); err != nil {
				t.Fatalf("%s: %v", lb.Name, err)
			}
		}
		for _, p := range linkAddrs(i, 1) {
			gws[p.Addr().Is6()] = append(gws[p.Addr().Is6()], p.Addr())
		}
	}
	for _, vip := range vips {
		if err := topo.AddRoute(path, netip.PrefixFrom(vip, vip.BitLen()), gws[vip.Is6()]...); err != nil {
			t.Fatal(err)
		}
	}
}

// echoAt returns the address and port of the echo service on vip, and the
// external host's address of its family.
func echoAt(vip netip.Addr) (netip.AddrPort, netip.Addr) {
	return netip.AddrPortFrom(vip, echoPort), extAddrs[vip.Is6()]
}
