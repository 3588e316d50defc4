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
	"k8s.io/apimachinery/pkg/types"
)

// scaleSteps are the replicas the Scale scenario gives the targets'
// Deployment, one after the other, from targetReplicas and back to it.
var scaleSteps = []int{12, 1, 6, targetReplicas}

// logLine is a JSON line of a component's or a stub's log (log/slog),
// with the attributes the suite reads.
type logLine struct {
	Time     time.Time `json:"time"`
	Msg      string    `json:"msg"`
	ID       string    `json:"id"`
	Rollback bool      `json:"rollback"`
}

// removal is a target scaled away: the addresses it held, and when the
// scale-down that removed it began.
type removal struct {
	addrs []netip.Addr
	at    time.Time
}

// scaleTargets: the targets' Deployment scaled 3 → 12 → 1 → 6 and back
// to 3 while the external host probes every VIP (TCP and UDP; each step's
// loss is a figure). After each step every target answers on every VIP
// and holds one address of each family that no other target, no proxy's
// bridge and no LB holds; the targets that stay keep theirs; each proxy's
// bridge has a port for each target of its node and each LB; and every
// LB routes each VIP to exactly the targets' addresses of its family.
// The addresses of the targets removed are released (the proxy logs it)
// after the proxy's release delay from their scale-down and not before;
// a target that came up meanwhile holds none of them unless it connected
// after their release.
func (tr *trench) scaleTargets(ctx context.Context, t *testing.T) {
	proxies := tr.c.proxyPods(ctx, t)
	delay, err := time.ParseDuration(podEnv(proxies[0], proxyContainer, "NSM_IP_RELEASE_DELAY"))
	if err != nil {
		t.Fatalf("the proxy's release delay: %v", err)
	}
	replicas := targetReplicas
	t.Cleanup(func() {
		if replicas == targetReplicas {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		tr.c.scaleTargetsTo(ctx, t, targetReplicas)
		tr.c.stubPods(ctx, t, targetsName, targetReplicas, "target connected")
	})
	pods := tr.c.stubPods(ctx, t, targetsName, replicas, "target connected")
	addrs := tr.addrsOf(ctx, t, pods)
	removed := map[string]removal{}
	for _, n := range scaleSteps {
		stop := tr.probeEveryVIP(ctx, t)
		start := time.Now()
		tr.c.scaleTargetsTo(ctx, t, n)
		prev := replicas
		replicas = n
		next := tr.c.stubPods(ctx, t, targetsName, n, "target connected")
		up := time.Since(start)
		tr.waitServedBy(ctx, t, chartVIPs, podNames(next))
		served := time.Since(start)
		lost, total, longest := sumSeries(stop())
		t.Logf("FIGURE: targets scaled %d → %d: every target connected after %.1f s, every one answering on every VIP after %.1f s; %d of %d probes lost (every VIP, TCP and UDP), longest gap %s",
			prev, n, up.Seconds(), served.Seconds(), lost, total, longest.Round(time.Millisecond))
		nextAddrs := tr.addrsOf(ctx, t, next)
		for name, list := range addrs {
			if _, ok := nextAddrs[name]; !ok {
				removed[name] = removal{addrs: list, at: start}
			}
		}
		tr.checkScaled(ctx, t, proxies, next, addrs, nextAddrs)
		tr.checkNotReused(ctx, t, proxies, next, nextAddrs, removed)
		t.Logf("%d targets: %v", n, nextAddrs)
		addrs = nextAddrs
	}
	tr.checkReleased(ctx, t, proxies, removed, delay)
}

// scaleTargetsTo gives the targets' Deployment n replicas.
func (c *cluster) scaleTargetsTo(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec": {"replicas": %d}}`, n)
	if _, err := c.client.AppsV1().Deployments(chartNamespace).Patch(ctx, targetsName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scale %s to %d: %v", targetsName, n, err)
	}
}

// checkScaled checks the targets pods after a scale from before: their
// addresses (after) unique and held by no proxy's bridge and no LB, the
// survivors' kept, every LB's routes to the VIPs via exactly them, and
// each proxy's bridge ports.
func (tr *trench) checkScaled(ctx context.Context, t *testing.T, proxies, pods []*corev1.Pod, before, after map[string][]netip.Addr) {
	t.Helper()
	checkUnique(t, after)
	checkKept(t, before, after)
	others := tr.othersAddrs(ctx, t, proxies)
	want := map[bool][]netip.Addr{}
	for name, list := range after {
		for _, a := range list {
			if holder, ok := others[a]; ok {
				t.Errorf("target %s holds %s, which %s holds", name, a, holder)
			}
			want[a.Is4()] = append(want[a.Is4()], a)
		}
	}
	for _, list := range want {
		slices.SortFunc(list, netip.Addr.Compare)
	}
	var lbPaths []string
	for _, lb := range tr.ext.lbs {
		lbPaths = append(lbPaths, tr.c.podNetNS(ctx, t, lb, "stub"))
	}
	eventually(ctx, t, "every LB routes each VIP via the targets' addresses", func(context.Context) error {
		for i, path := range lbPaths {
			for _, vip := range chartVIPs {
				if got := lbGateways(t, path, vip); !slices.Equal(got, want[vip.Is4()]) {
					return fmt.Errorf("LB %s routes %s via %v, want %v", tr.ext.lbs[i].Name, vip, got, want[vip.Is4()])
				}
			}
		}
		return nil
	})
	eventually(ctx, t, "each proxy's bridge has a port for each target of its node and each LB", func(context.Context) error {
		for _, p := range proxies {
			want := len(tr.ext.lbs)
			for _, target := range pods {
				if target.Spec.NodeName == p.Spec.NodeName {
					want++
				}
			}
			if got := bridgePorts(t, tr.c.podNetNS(ctx, t, p, proxyContainer)); got != want {
				return fmt.Errorf("%s's bridge has %d ports, want %d", p.Name, got, want)
			}
		}
		return nil
	})
}

// othersAddrs returns the addresses on the conduit that are not the
// targets': the proxies' bridges' and the LBs', each with its holder.
func (tr *trench) othersAddrs(ctx context.Context, t *testing.T, proxies []*corev1.Pod) map[netip.Addr]string {
	t.Helper()
	out := map[netip.Addr]string{}
	for _, p := range proxies {
		for _, n := range tr.c.podAddrs(ctx, t, p, proxyContainer, chartBridgeName) {
			if a, ok := netip.AddrFromSlice(n.IP); ok && !a.IsLinkLocalUnicast() {
				out[a.Unmap()] = "the bridge of " + p.Name
			}
		}
	}
	for _, lb := range tr.ext.lbs {
		for _, p := range proxies {
			_, addrs := tr.c.conduitLink(ctx, t, lb, p)
			for _, a := range addrs {
				out[a] = "LB " + lb.Name
			}
		}
	}
	return out
}

// checkNotReused fails t when a target of pods holds (addrs) an address
// that a removed target held and connected before the proxies logged the
// release of that target's addresses.
func (tr *trench) checkNotReused(ctx context.Context, t *testing.T, proxies, pods []*corev1.Pod, addrs map[string][]netip.Addr, removed map[string]removal) {
	t.Helper()
	holders := map[netip.Addr][]string{}
	for name, r := range removed {
		for _, a := range r.addrs {
			holders[a] = append(holders[a], name)
		}
	}
	var released map[string]time.Time
	for name, list := range addrs {
		for _, a := range list {
			if len(holders[a]) == 0 {
				continue
			}
			if released == nil {
				released = tr.c.releases(ctx, proxies)
			}
			connected := tr.c.connectedAt(ctx, t, pods, name)
			for _, old := range holders[a] {
				if rel, ok := released[releaseID(old)]; !ok || connected.Before(rel) {
					t.Errorf("target %s holds %s, which the removed target %s held, and connected at %s, before its release (%s, logged %v)",
						name, a, old, connected.Format(time.RFC3339Nano), rel.Format(time.RFC3339Nano), ok)
				}
			}
		}
	}
}

// checkReleased waits until the proxies have logged the release of the
// addresses of every removed target, and fails t for those released
// before the release delay from their scale-down.
func (tr *trench) checkReleased(ctx context.Context, t *testing.T, proxies []*corev1.Pod, removed map[string]removal, delay time.Duration) {
	t.Helper()
	// A release comes after the delay; a close that never reached the
	// proxy would wait for the connection's expiry, minutes later.
	ctx, cancel := context.WithTimeout(ctx, delay+2*time.Minute)
	defer cancel()
	var released map[string]time.Time
	eventually(ctx, t, "the release of every removed target's addresses", func(ctx context.Context) error {
		released = tr.c.releases(ctx, proxies)
		for name := range removed {
			if _, ok := released[releaseID(name)]; !ok {
				return fmt.Errorf("none logged for %s", name)
			}
		}
		return nil
	})
	first, last := time.Duration(1<<62), time.Duration(0)
	for name, r := range removed {
		after := released[releaseID(name)].Sub(r.at)
		if after < delay {
			t.Errorf("the addresses %v of %s released %s after its scale-down began, before the release delay %s", r.addrs, name, after, delay)
		}
		first, last = min(first, after), max(last, after)
	}
	t.Logf("FIGURE: targets scaled away: the addresses of each of the %d released %.1f–%.1f s after its scale-down began (release delay %s)",
		len(removed), first.Seconds(), last.Seconds(), delay)
}

// releases returns when the proxies logged the release of the addresses
// of each closed connection (not a rollback), by connection id.
func (c *cluster) releases(ctx context.Context, proxies []*corev1.Pod) map[string]time.Time {
	out := map[string]time.Time{}
	for _, p := range proxies {
		for _, l := range jsonLogs[logLine](ctx, c, p, proxyContainer, metav1.Time{}) {
			if _, seen := out[l.ID]; l.Msg == "addresses released" && !l.Rollback && !seen {
				out[l.ID] = l.Time
			}
		}
	}
	return out
}

// releaseID is the id of the connection of the target pod name, as the
// proxy logs it: the target stub's connection id.
func releaseID(name string) string { return name + "-" + proxyService }

// connectedAt returns when the target pod name of pods logged that it was
// connected.
func (c *cluster) connectedAt(ctx context.Context, t *testing.T, pods []*corev1.Pod, name string) time.Time {
	t.Helper()
	for _, p := range pods {
		if p.Name != name {
			continue
		}
		for _, l := range jsonLogs[logLine](ctx, c, p, "stub", metav1.Time{}) {
			if l.Msg == "target connected" {
				return l.Time
			}
		}
	}
	t.Fatalf("target %s logged no connection", name)
	return time.Time{}
}
