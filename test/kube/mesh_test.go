package kube_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
)

// conduitLinkOf is one of an LB's links on the conduit: its kind (veth
// within a node, vxlan across nodes) and the node subnet of its IPv4
// address.
type conduitLinkOf struct {
	name, kind string
	subnet     netip.Prefix
}

// conduitLinks returns the LB's links with an address of the chart's IPv4
// pool: one per proxy it is connected to.
func (c *cluster) conduitLinks(ctx context.Context, t *testing.T, lb *corev1.Pod) []conduitLinkOf {
	t.Helper()
	pool := netip.MustParsePrefix(chartIPv4Pool)
	var out []conduitLinkOf
	withHandle(t, c.podNetNS(ctx, t, lb, "stub"), func(h *netlink.Handle) {
		links, err := h.LinkList()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			list, err := h.AddrList(l, netlink.FAMILY_V4)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range list {
				ip, _ := netip.AddrFromSlice(a.IP.To4())
				bits, _ := a.Mask.Size()
				if pool.Contains(ip) {
					out = append(out, conduitLinkOf{name: l.Attrs().Name, kind: l.Type(), subnet: netip.PrefixFrom(ip, bits).Masked()})
					break
				}
			}
		}
	})
	return out
}

// meshAcrossNodes: every LB is connected to the proxy of every node (a
// DaemonSet), each connection with addresses of its node's own subnet; the
// connection to the proxy of the LB's own node is a veth pair, those to
// the proxies of the other nodes VXLAN devices, which only a connection
// through both nodes' forwarders makes.
func (tr *trench) meshAcrossNodes(ctx context.Context, t *testing.T) {
	nodes := len(tr.c.nodes(ctx, t))
	for _, lb := range tr.c.stubPods(ctx, t, lbDeployment, 2, "lb stub ready") {
		var links []conduitLinkOf
		eventually(ctx, t, fmt.Sprintf("LB %s on %s connected to the %d proxies", lb.Name, lb.Spec.NodeName, nodes), func(ctx context.Context) error {
			links = tr.c.conduitLinks(ctx, t, lb)
			kinds, subnets := map[string]int{}, map[netip.Prefix]bool{}
			for _, l := range links {
				kinds[l.kind]++
				subnets[l.subnet] = true
			}
			if len(links) != nodes || kinds["veth"] != 1 || kinds["vxlan"] != nodes-1 || len(subnets) != nodes {
				return fmt.Errorf("links on the conduit %+v: want a veth and %d VXLAN devices, each in its own node subnet", links, nodes-1)
			}
			return nil
		})
		t.Logf("LB %s on %s: %+v", lb.Name, lb.Spec.NodeName, links)
	}
}
