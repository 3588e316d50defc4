package kube_test

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"

	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// withHandle calls fn with a netlink handle in the namespace at path.
func withHandle(t *testing.T, path string, fn func(*netlink.Handle)) {
	t.Helper()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	fn(h)
}

// conduitLink returns the name and the addresses of the LB's link to
// proxy: the one with addresses of the proxy's node subnet (its bridge's
// prefixes).
func (c *cluster) conduitLink(ctx context.Context, t *testing.T, lb, proxy *corev1.Pod) (string, []netip.Addr) {
	t.Helper()
	var subnets []netip.Prefix
	for _, a := range c.podAddrs(ctx, t, proxy, proxyContainer, chartBridgeName) {
		ip, _ := netip.AddrFromSlice(a.IP)
		ones, _ := a.Mask.Size()
		if ip = ip.Unmap(); !ip.IsLinkLocalUnicast() {
			subnets = append(subnets, netip.PrefixFrom(ip, ones).Masked())
		}
	}
	var name string
	var addrs []netip.Addr
	withHandle(t, c.podNetNS(ctx, t, lb, "stub"), func(h *netlink.Handle) {
		links, err := h.LinkList()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			list, err := h.AddrList(l, netlink.FAMILY_ALL)
			if err != nil {
				t.Fatal(err)
			}
			var own []netip.Addr
			toProxy := false
			for _, a := range list {
				ip, _ := netip.AddrFromSlice(a.IP)
				ip = ip.Unmap()
				toProxy = toProxy || slices.ContainsFunc(subnets, func(p netip.Prefix) bool { return p.Contains(ip) })
				if !ip.IsLinkLocalUnicast() {
					own = append(own, ip)
				}
			}
			if toProxy {
				name, addrs = l.Attrs().Name, own
			}
		}
	})
	if name == "" {
		t.Fatalf("%s has no link to %s (node subnets %v)", lb.Name, proxy.Name, subnets)
	}
	return name, addrs
}

// proxyNexthops returns the gateways of the proxy's ECMP routes (its
// routing table, dataplane.DefaultTable), sorted.
func (c *cluster) proxyNexthops(ctx context.Context, t *testing.T, proxy *corev1.Pod) []netip.Addr {
	t.Helper()
	var gws []netip.Addr
	withHandle(t, c.podNetNS(ctx, t, proxy, proxyContainer), func(h *netlink.Handle) {
		routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: 1}, netlink.RT_FILTER_TABLE)
		if err != nil {
			t.Fatal(err)
		}
		gws = topo.Gateways(routes)
	})
	return gws
}

// nftIn runs nft with script on stdin in the namespace at path.
func nftIn(t *testing.T, path, script string) {
	t.Helper()
	cmd := exec.Command("nsenter", "--net="+path, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v: %s", path, err, out)
	}
}

// freezeLB: one LB drops everything on its link to the proxy (nftables in
// its namespace; the link stays up); the proxy's datapath liveness takes
// its addresses out of the ECMP routes, and puts them back once the link
// is mended. Both as figures. (The external host keeps routing to the
// frozen LB, as a router would until the LB's BGP session drops: its flows
// are not checked meanwhile.)
func (tr *trench) freezeLB(ctx context.Context, t *testing.T) {
	proxy := tr.c.waitProxyReady(ctx, t)
	lb := tr.ext.lbs[0]
	link, addrs := tr.c.conduitLink(ctx, t, lb, proxy)
	has := func() (all, none bool) {
		gws := tr.c.proxyNexthops(ctx, t, proxy)
		all, none = true, true
		for _, a := range addrs {
			in := slices.Contains(gws, a)
			all, none = all && in, none && !in
		}
		return all, none
	}
	if all, _ := has(); !all {
		t.Fatalf("the proxy's nexthops %v lack %s's %v", tr.c.proxyNexthops(ctx, t, proxy), lb.Name, addrs)
	}
	path := tr.c.podNetNS(ctx, t, lb, "stub")
	nftIn(t, path, fmt.Sprintf(`table inet frozen {
	chain input_c { type filter hook input priority 0; iifname %q drop; }
	chain forward_c { type filter hook forward priority 0; iifname %q drop; oifname %q drop; }
	chain output_c { type filter hook output priority 0; oifname %q drop; }
}`, link, link, link, link))
	mended := false
	mend := func() {
		if !mended {
			mended = true
			nftIn(t, path, "delete table inet frozen")
		}
	}
	t.Cleanup(mend)
	start := time.Now()
	eventually(ctx, t, "the frozen LB's nexthops out of the proxy's routes", func(context.Context) error {
		if _, none := has(); !none {
			return fmt.Errorf("nexthops %v", tr.c.proxyNexthops(ctx, t, proxy))
		}
		return nil
	})
	out := time.Since(start)
	mend()
	start = time.Now()
	eventually(ctx, t, "the mended LB's nexthops back", func(context.Context) error {
		if all, _ := has(); !all {
			return fmt.Errorf("nexthops %v", tr.c.proxyNexthops(ctx, t, proxy))
		}
		return nil
	})
	t.Logf("FIGURE: LB frozen on its conduit link: out of the proxy's ECMP routes after %.2f s, back %.2f s after the link was mended",
		out.Seconds(), time.Since(start).Seconds())
}
