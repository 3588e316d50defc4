package kube_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// deleteLB: an LB pod deleted, not frozen (Meridio's kill-stateless-lb),
// while the external host probes every VIP. The external host first
// routes the VIPs through the other LB only, as a router does once the
// LB's session drops (the stub has no BGP speaker). The deleted LB's
// conduit addresses then leave every proxy's ECMP routes; the
// Deployment's new LB pod, linked to the external host as soon as it
// runs, connects to every proxy: its addresses, of the proxy's subnets
// and held by no other LB or target (the old one's are not reused), are
// back in every proxy's routes, every proxy's bridge has as many ports as
// before, and the new LB routes every VIP via exactly the targets'
// addresses. The external host then routes the VIPs through it too, and
// every VIP is served through both LBs by every target. The times and the
// probes lost are figures; the traffic must come back.
func (tr *trench) deleteLB(ctx context.Context, t *testing.T) {
	// A bound on it all happening at all, far above its figures.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	c := tr.c
	proxies := c.proxyPods(ctx, t)
	old, survivor := tr.ext.lbs[0], tr.ext.lbs[1]
	oldAddrs, ports := map[string][]netip.Addr{}, map[string]int{}
	for _, p := range proxies {
		_, oldAddrs[p.Name] = c.conduitLink(ctx, t, old, p)
		if gws := c.proxyNexthops(ctx, t, p); !containsAll(gws, oldAddrs[p.Name]) {
			t.Fatalf("the nexthops %v of proxy %s lack %s's %v", gws, p.Name, old.Name, oldAddrs[p.Name])
		}
		ports[p.Name] = bridgePorts(t, c.podNetNS(ctx, t, p, proxyContainer))
	}

	stop := tr.probeEveryVIP(ctx, t)
	drops := watchBacklog(t, "an LB pod was deleted")
	time.Sleep(time.Second)
	tr.routeVIPsVia(t, 1)
	start := time.Now()
	if err := c.client.CoreV1().Pods(chartNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete %s: %v", old.Name, err)
	}
	eventually(ctx, t, "the deleted LB's addresses out of every proxy's nexthops", func(context.Context) error {
		for _, p := range proxies {
			if gws := c.proxyNexthops(ctx, t, p); slices.ContainsFunc(oldAddrs[p.Name], func(a netip.Addr) bool { return slices.Contains(gws, a) }) {
				return fmt.Errorf("proxy %s: nexthops %v", p.Name, gws)
			}
		}
		return nil
	})
	out := time.Since(start)
	// Linked as soon as it runs, as a real LB's external interface is from
	// its start: the proxies send it replies once it joins them.
	lb := c.waitReplacedWhere(ctx, t, old, metav1.ListOptions{LabelSelector: "app=" + lbDeployment, FieldSelector: "metadata.name!=" + survivor.Name})
	tr.linkNewLB(ctx, t, 0, lb)
	c.stubPods(ctx, t, lbDeployment, 2, "lb stub ready")
	ready := time.Since(start)
	eventually(ctx, t, "the new LB connected to every proxy", func(context.Context) error {
		if links := c.conduitLinks(ctx, t, lb); len(links) != len(proxies) {
			return fmt.Errorf("%s has the conduit links %v", lb.Name, links)
		}
		return nil
	})
	newAddrs := map[string][]netip.Addr{}
	eventually(ctx, t, "the new LB's addresses in every proxy's nexthops, a bridge port for it", func(context.Context) error {
		for _, p := range proxies {
			_, newAddrs[p.Name] = c.conduitLink(ctx, t, lb, p)
			if gws := c.proxyNexthops(ctx, t, p); !containsAll(gws, newAddrs[p.Name]) {
				return fmt.Errorf("proxy %s: nexthops %v, the new LB's %v", p.Name, gws, newAddrs[p.Name])
			}
			if n := bridgePorts(t, c.podNetNS(ctx, t, p, proxyContainer)); n != ports[p.Name] {
				return fmt.Errorf("proxy %s: %d bridge ports, %d before", p.Name, n, ports[p.Name])
			}
		}
		return nil
	})
	joined := time.Since(start)
	tr.checkNewLB(ctx, t, proxies, lb, survivor, oldAddrs, newAddrs)

	tr.routeVIPsVia(t, 0, 1)
	tr.waitServed(ctx, t)
	time.Sleep(time.Second)
	lost, total, longest := reportLoss(t, stop(), "an LB pod was deleted")
	dropped := drops()
	t.Logf("FIGURE: LB pod deleted (kill-stateless-lb; the external host routing through the other LB from the delete on): its addresses out of every proxy's ECMP routes after %.2f s; the new LB pod ready after %.1f s, in every proxy's routes after %.1f s; every VIP meanwhile: %d of %d probes lost, longest gap %s; the kernel's input backlogs dropped %d packets",
		out.Seconds(), ready.Seconds(), joined.Seconds(), lost, total, longest.Round(time.Millisecond), dropped)
	tr.checkTraffic(ctx, t)
}

// checkNewLB checks the addresses and routes of the LB pod lb that
// replaced a deleted one: on each proxy's link its addresses (newAddrs,
// by proxy) are none of the deleted LB's (oldAddrs), the surviving LB's
// or a target's; it routes every VIP via exactly the targets' addresses.
func (tr *trench) checkNewLB(ctx context.Context, t *testing.T, proxies []*corev1.Pod, lb, survivor *corev1.Pod, oldAddrs, newAddrs map[string][]netip.Addr) {
	t.Helper()
	c := tr.c
	targets := tr.targetAddrs(ctx, t)
	gateways := map[bool][]netip.Addr{} // by family (Is4)
	for _, list := range targets {
		for _, a := range list {
			gateways[a.Is4()] = append(gateways[a.Is4()], a)
		}
	}
	for _, list := range gateways {
		slices.SortFunc(list, netip.Addr.Compare)
	}
	for _, p := range proxies {
		_, kept := c.conduitLink(ctx, t, survivor, p)
		taken := slices.Concat(oldAddrs[p.Name], kept)
		for _, list := range targets {
			taken = append(taken, list...)
		}
		for _, a := range newAddrs[p.Name] {
			if slices.Contains(taken, a) {
				t.Errorf("the new LB %s holds %s on its link to %s, an address of the deleted LB, the other LB or a target (%v)", lb.Name, a, p.Name, taken)
			}
		}
	}
	path := c.podNetNS(ctx, t, lb, "stub")
	eventually(ctx, t, "the new LB routes every VIP via every target", func(context.Context) error {
		for _, vip := range stubVIPs() {
			if got := lbGateways(t, path, vip); !slices.Equal(got, gateways[vip.Is4()]) {
				return fmt.Errorf("the new LB %s routes %s via %v, want the targets' %v", lb.Name, vip, got, gateways[vip.Is4()])
			}
		}
		return nil
	})
}

// routeVIPsVia routes every VIP of the stubs from the external host via
// the LBs of the indexes lbs only (their ends of the external links).
func (tr *trench) routeVIPsVia(t *testing.T, lbs ...int) {
	t.Helper()
	for _, vip := range stubVIPs() {
		var gws []netip.Addr
		for _, i := range lbs {
			for _, p := range linkAddrs(i, 1) {
				if p.Addr().Is4() == vip.Is4() {
					gws = append(gws, p.Addr())
				}
			}
		}
		if err := topo.AddRoute(tr.ext.ns.Path(), netip.PrefixFrom(vip, vip.BitLen()), gws...); err != nil {
			t.Fatal(err)
		}
	}
}

// linkNewLB links the external host to lb as LB i, in place of the
// deleted pod that was (its link removed if still there), routing no VIP
// through it yet.
func (tr *trench) linkNewLB(ctx context.Context, t *testing.T, i int, lb *corev1.Pod) {
	t.Helper()
	tr.dropExtLinks(t, i, 1)
	tr.c.linkExternal(ctx, t, tr.ext.ns.Path(), []*corev1.Pod{lb}, i, nil)
	tr.ext.lbs[i] = lb
}

// containsAll says whether list holds every address of want.
func containsAll(list, want []netip.Addr) bool {
	for _, a := range want {
		if !slices.Contains(list, a) {
			return false
		}
	}
	return true
}
