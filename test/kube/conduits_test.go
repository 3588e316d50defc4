package kube_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/causeway-net/causeway/internal/netnsdo"
)

// The example's conduit prefix lengths (the chart's subnetPool).
const (
	conduitBitsV4 = 20
	conduitBitsV6 = 56
)

// conduitValues is servicesValues with the conduits named added to the
// trench's list (names only: no LB serves them, so their proxies register
// and take their bridge addresses but are never Ready).
func conduitValues(names ...string) string {
	v := servicesValues
	for _, n := range names {
		v += "  - name: " + n + "\n"
	}
	return v
}

// reAddConduit: a conduit added to the trench by helm upgrade, removed,
// and added again, while the external host probes every VIP. Added: its
// proxies run on every node with bridge addresses in a conduit prefix of
// its own (per family). Removed: its proxies go, the IPAM keeps its
// prefixes, draining, while the addresses in them are leased (the proxies
// leave their leases, as on any stop), and a conduit added meanwhile gets
// other prefixes. Added again: its proxies come back with bridge
// addresses in the prefixes it had. The example conduit's proxies (the
// same pods) and the VIPs' traffic are untouched throughout.
func (tr *trench) reAddConduit(ctx context.Context, t *testing.T) {
	const extra, other = "extra", "other"
	nodes := len(tr.c.nodes(ctx, t))
	// The IPAM's pod of the moment: a conduit added or removed changes the
	// IDs it authorizes (a rule per conduit's proxies), so each upgrade
	// replaces it, and its first conduit list drains again what it drained.
	draining := func() float64 {
		if !tr.c.ipamRolledOut(ctx) {
			return -1
		}
		ipam := tr.c.runningPods(ctx, t, chartNamespace, "app.kubernetes.io/component=ipam")
		if len(ipam) != 1 || !podReady(ipam[0]) {
			return -1
		}
		return tr.c.metric(ctx, t, ipam[0], "ipam", 2112, "causeway_ipam_conduits_draining", "")
	}
	var drained float64
	eventually(ctx, t, "the IPAM's metrics", func(context.Context) error {
		if drained = draining(); drained < 0 {
			return fmt.Errorf("no Ready IPAM pod")
		}
		return nil
	})
	proxies := podUIDs(tr.c.runningPods(ctx, t, chartNamespace, proxySelector))
	restored := false
	t.Cleanup(func() {
		if !restored {
			helmUpgradeValues(t, servicesValues)
		}
	})

	stop := tr.probeEveryVIP(ctx, t)
	time.Sleep(time.Second)
	start := time.Now()
	helmUpgradeValues(t, conduitValues(extra))
	first := tr.conduitPrefixes(ctx, t, extra, nodes)
	added := time.Since(start)

	helmUpgradeValues(t, servicesValues)
	tr.c.waitPodsGone(t, chartNamespace, conduitSelector(extra))
	// Both families' prefixes of extra drain once the configuration
	// server's file (a ConfigMap the kubelet refreshes) no longer lists it.
	eventually(ctx, t, "the IPAM draining "+extra+"'s prefixes", func(context.Context) error {
		if n := draining(); n < 0 {
			return fmt.Errorf("the IPAM's pod not rolled out and Ready")
		} else if n < drained+2 {
			return fmt.Errorf("%v conduit prefixes draining, want %v", n, drained+2)
		}
		return nil
	})
	removed := time.Since(start)

	helmUpgradeValues(t, conduitValues(other))
	second := tr.conduitPrefixes(ctx, t, other, nodes)
	if shared := intersect(first, second); len(shared) > 0 {
		t.Errorf("conduit %s got %v, which %s (drained, still leased) holds", other, shared, extra)
	}

	helmUpgradeValues(t, conduitValues(extra))
	again := tr.conduitPrefixes(ctx, t, extra, nodes)
	if !slices.Equal(first, again) {
		t.Errorf("conduit %s added again has the prefixes %v, had %v", extra, again, first)
	}
	helmUpgradeValues(t, servicesValues)
	restored = true
	tr.c.waitPodsGone(t, chartNamespace, conduitSelector(extra))
	tr.c.waitPodsGone(t, chartNamespace, conduitSelector(other))
	series := stop()

	lost, total, longest := noOutages(t, series, "conduits added and removed", start)
	if now := podUIDs(tr.c.runningPods(ctx, t, chartNamespace, proxySelector)); !maps.Equal(now, proxies) {
		t.Errorf("the example conduit's proxies changed: %v, were %v", now, proxies)
	}
	t.Logf("FIGURE: a conduit added by helm upgrade: its proxies on %d nodes with their bridges after %.1f s; removed: its prefixes draining %.1f s after the add (the nsp's ConfigMap refreshed); %s's prefixes %v, %s's again %v; %d of %d probes of the other conduit's VIPs lost, longest gap %s",
		nodes, added.Seconds(), removed.Seconds(), other, second, extra, again, lost, total, longest.Round(time.Millisecond))
}

// ipamRolledOut says whether the IPAM's StatefulSet runs its current
// template Ready (a helm upgrade that changed it has replaced its pod).
func (c *cluster) ipamRolledOut(ctx context.Context) bool {
	sts, err := c.client.AppsV1().StatefulSets(chartNamespace).Get(ctx, "ipam-"+chartRelease, metav1.GetOptions{})
	if err != nil || sts.Spec.Replicas == nil {
		return false
	}
	st, n := sts.Status, *sts.Spec.Replicas
	return st.ObservedGeneration >= sts.Generation && st.CurrentRevision == st.UpdateRevision &&
		st.UpdatedReplicas == n && st.ReadyReplicas == n
}

// conduitSelector selects the proxies of conduit.
func conduitSelector(conduit string) string {
	return "app.kubernetes.io/component=proxy-" + conduit
}

// conduitPrefixes waits until conduit has a proxy running on each of the
// nodes, each with bridge addresses of both families, and returns the
// conduit prefixes those are in, sorted (two when every proxy's addresses
// are of the same conduit prefix per family).
func (tr *trench) conduitPrefixes(ctx context.Context, t *testing.T, conduit string, nodes int) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	eventually(ctx, t, "the proxies of conduit "+conduit+" with their bridge addresses", func(ctx context.Context) error {
		pods := runningContainer(tr.c.runningPods(ctx, t, chartNamespace, conduitSelector(conduit)), proxyContainer)
		if len(pods) != nodes {
			return fmt.Errorf("%d proxies running, want %d", len(pods), nodes)
		}
		set := map[netip.Prefix]bool{}
		for _, p := range pods {
			addrs, err := globalAddrs(tr.c.podNetNS(ctx, t, p, proxyContainer), chartBridgeName)
			if err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
			fams := map[bool]bool{}
			for _, a := range addrs {
				bits := conduitBitsV6
				if a.Is4() {
					bits = conduitBitsV4
				}
				set[netip.PrefixFrom(a, bits).Masked()] = true
				fams[a.Is4()] = true
			}
			if len(fams) != 2 {
				return fmt.Errorf("%s: bridge addresses %v, want both families", p.Name, addrs)
			}
		}
		out = slices.SortedFunc(maps.Keys(set), func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
		return nil
	})
	if len(out) != 2 {
		t.Errorf("the proxies of conduit %s have bridges in %v: want one conduit prefix per family", conduit, out)
	}
	return out
}

// runningContainer keeps the pods whose container runs.
func runningContainer(pods []*corev1.Pod, container string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == container && s.State.Running != nil && s.ContainerID != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// globalAddrs returns the addresses of link in the network namespace at
// path, link-local ones left out; an error if the link is not there.
func globalAddrs(path, link string) ([]netip.Addr, error) {
	var out []netip.Addr
	err := netnsdo.DoPath(path, func() error {
		l, err := netlink.LinkByName(link)
		if err != nil {
			return err
		}
		list, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, a := range list {
			if ip, ok := netip.AddrFromSlice(a.IP); ok && !ip.IsLinkLocalUnicast() {
				out = append(out, ip.Unmap())
			}
		}
		return nil
	})
	return out, err
}

// podUIDs maps each pod's name to its UID.
func podUIDs(pods []*corev1.Pod) map[string]types.UID {
	out := make(map[string]types.UID, len(pods))
	for _, p := range pods {
		out[p.Name] = p.UID
	}
	return out
}

// intersect returns the prefixes of a that are in b.
func intersect(a, b []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range a {
		if slices.Contains(b, p) {
			out = append(out, p)
		}
	}
	return out
}
