package kube_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// What the scenarios read of the kernel in the namespaces of the proxies
// and of the LB stubs.

// proxyTable is the proxy's routing table (dataplane.DefaultTable), which
// its rules from the VIPs look up.
const proxyTable = 1

// proxyPods returns the running proxy pods of the example's conduit, one
// per node, sorted by name.
func (c *cluster) proxyPods(ctx context.Context, t *testing.T) []*corev1.Pod {
	t.Helper()
	return c.proxyPodsIn(ctx, t, chartNamespace, proxySelector)
}

// proxyPodsIn is proxyPods of the proxies of selector in namespace ns.
func (c *cluster) proxyPodsIn(ctx context.Context, t *testing.T, ns, selector string) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	eventually(ctx, t, "a Ready proxy pod of "+selector+" on every node", func(ctx context.Context) error {
		list, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		pods = pods[:0]
		for i := range list.Items {
			if p := &list.Items[i]; p.DeletionTimestamp == nil && podReady(p) {
				pods = append(pods, p)
			}
		}
		if want := len(clusterNodes(t)); len(pods) != want {
			return fmt.Errorf("%d Ready proxy pods, want %d", len(pods), want)
		}
		return nil
	})
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods
}

// vipRules returns the sources of the rules of the namespace at path that
// look up the proxy's table.
func vipRules(t *testing.T, path string) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	withHandle(t, path, func(h *netlink.Handle) {
		rules, err := h.RuleList(netlink.FAMILY_ALL)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			if r.Table != proxyTable || r.Src == nil {
				continue
			}
			if a, ok := netip.AddrFromSlice(r.Src.IP); ok {
				out = append(out, a.Unmap())
			}
		}
	})
	return out
}

// conntrackEntries counts the entries of the conntrack table of the
// namespace at path with addr as a source or destination of either
// direction (the conntrack tool, as the lab's tests read it).
func conntrackEntries(t *testing.T, path string, addr netip.Addr) int {
	t.Helper()
	family := map[bool]string{true: "ipv4", false: "ipv6"}[addr.Is4()]
	out, err := exec.Command("nsenter", "--net="+path, "conntrack", "-L", "-f", family).Output()
	if err != nil {
		t.Fatalf("conntrack -L in %s: %v", path, err)
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "src="+addr.String()+" ") || strings.Contains(line, "dst="+addr.String()+" ") {
			n++
		}
	}
	return n
}

// lbGateways returns the gateways of the route to vip in the main table of
// the namespace at path (an LB stub's), sorted; none without a route.
func lbGateways(t *testing.T, path string, vip netip.Addr) []netip.Addr {
	t.Helper()
	var gws []netip.Addr
	withHandle(t, path, func(h *netlink.Handle) {
		dst := &net.IPNet{IP: vip.AsSlice(), Mask: net.CIDRMask(vip.BitLen(), vip.BitLen())}
		routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Dst: dst, Table: syscall.RT_TABLE_MAIN},
			netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
		if err != nil {
			t.Fatal(err)
		}
		gws = topo.Gateways(routes)
	})
	return gws
}

// bridgePorts counts the ports of the proxy's bridge in the namespace at
// path.
func bridgePorts(t *testing.T, path string) int {
	t.Helper()
	n := 0
	withHandle(t, path, func(h *netlink.Handle) {
		bridge, err := h.LinkByName(chartBridgeName)
		if err != nil {
			t.Fatal(err)
		}
		links, err := h.LinkList()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			if l.Attrs().MasterIndex == bridge.Attrs().Index {
				n++
			}
		}
	})
	return n
}

// podEnv returns the value of the environment variable name of pod's
// container (its spec), "" when unset.
func podEnv(pod *corev1.Pod, container, name string) string {
	for _, c := range pod.Spec.Containers {
		if c.Name != container {
			continue
		}
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

// nftDeleteTable deletes the inet table name of the namespace at path if
// it is still there (a clean-up: errors ignored).
func nftDeleteTable(path, name string) {
	_ = exec.Command("nsenter", "--net="+path, "nft", "delete", "table", "inet", name).Run()
}
