package kube_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// targetAddrs returns the addresses each running target holds on the
// conduit (its NSM interface, VIPs and link-local addresses left out), by
// pod name.
func (tr *trench) targetAddrs(ctx context.Context, t *testing.T) map[string][]netip.Addr {
	t.Helper()
	return tr.addrsOf(ctx, t, tr.c.stubPods(ctx, t, targetsName, targetReplicas, "target connected"))
}

// addrsOf returns the addresses each target of pods holds on the conduit,
// as targetAddrs.
func (tr *trench) addrsOf(ctx context.Context, t *testing.T, pods []*corev1.Pod) map[string][]netip.Addr {
	t.Helper()
	out := map[string][]netip.Addr{}
	vips := stubVIPs()
	for _, p := range pods {
		for _, n := range tr.c.podAddrs(ctx, t, p, "stub", targetLink) {
			a, _ := netip.AddrFromSlice(n.IP)
			a = a.Unmap()
			if a.IsLinkLocalUnicast() || slices.Contains(vips, a) {
				continue
			}
			out[p.Name] = append(out[p.Name], a)
		}
		slices.SortFunc(out[p.Name], netip.Addr.Compare)
	}
	return out
}

// checkUnique fails t if two targets hold one address, or one holds none
// of a family.
func checkUnique(t *testing.T, addrs map[string][]netip.Addr) {
	t.Helper()
	holder := map[netip.Addr]string{}
	for name, list := range addrs {
		if len(list) != 2 || !list[0].Is4() || !list[1].Is6() {
			t.Errorf("target %s holds %v, want one address of each family", name, list)
		}
		for _, a := range list {
			if other, ok := holder[a]; ok {
				t.Errorf("targets %s and %s both hold %s", other, name, a)
			}
			holder[a] = name
		}
	}
}

// checkKept fails t if a target of before holds other addresses in after.
func checkKept(t *testing.T, before, after map[string][]netip.Addr) {
	t.Helper()
	for name, list := range before {
		if got, ok := after[name]; ok && !slices.Equal(got, list) {
			t.Errorf("target %s held %v, now %v", name, list, got)
		}
	}
}

// deletePod deletes pod and returns its replacement once Ready: for a
// DaemonSet's pod, the new pod on its node.
func (c *cluster) deletePod(ctx context.Context, t *testing.T, pod *corev1.Pod, selector string) *corev1.Pod {
	t.Helper()
	if err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete %s: %v", pod.Name, err)
	}
	if owner := metav1.GetControllerOf(pod); owner != nil && owner.Kind == "DaemonSet" {
		return c.waitReplacedOn(ctx, t, pod, selector)
	}
	return c.waitReplaced(ctx, t, pod, selector)
}

// replaceTarget deletes a target pod: its replacement connects and is
// served with addresses nobody else holds, the others keep theirs, and
// every target answers on both VIPs.
func (tr *trench) replaceTarget(ctx context.Context, t *testing.T) {
	t.Helper()
	before := tr.targetAddrs(ctx, t)
	// The target of the highest address goes: an IPAM that had forgotten
	// its allocations would hand out a lower one, which a survivor holds.
	var victim string
	for name, list := range before {
		if victim == "" || list[0].Compare(before[victim][0]) > 0 {
			victim = name
		}
	}
	after := tr.deleteTarget(ctx, t, victim)
	checkUnique(t, after)
	checkKept(t, before, after)
	tr.waitServed(ctx, t)
	t.Logf("targets before %v, after %v", before, after)
}

// deleteTarget deletes the target pod victim and returns the addresses
// of the targets once it is gone and replaced.
func (tr *trench) deleteTarget(ctx context.Context, t *testing.T, victim string) map[string][]netip.Addr {
	t.Helper()
	if err := tr.c.client.CoreV1().Pods(chartNamespace).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var after map[string][]netip.Addr
	eventually(ctx, t, "the deleted target replaced", func(ctx context.Context) error {
		after = tr.targetAddrs(ctx, t)
		if _, ok := after[victim]; ok {
			return fmt.Errorf("%s still there", victim)
		}
		return nil
	})
	return after
}

// reachServices: on every node with targets, a target pod reaches the
// chart's services, TCP and UDP of both families, and every target of its
// node answers as an endpoint. The services come from the services file,
// whose endpoints are the targets connected to the node's proxy
// (docs/servicelb.md): a proxy has no path to another node's targets.
func (tr *trench) reachServices(ctx context.Context, t *testing.T) {
	pods := tr.c.stubPods(ctx, t, targetsName, targetReplicas, "target connected")
	for _, svc := range chartServices {
		for _, network := range []string{"tcp", "udp"} {
			tr.servedOnEveryNode(ctx, t, pods, network, svc)
		}
	}
}

// byNode groups pods by their node.
func byNode(pods []*corev1.Pod) map[string][]*corev1.Pod {
	out := map[string][]*corev1.Pod{}
	for _, p := range pods {
		out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p)
	}
	return out
}

// servedOnEveryNode: on every node with targets of pods, flows of network
// from its first target to svc are answered by every target of the node
// (servedByAll), and logged.
func (tr *trench) servedOnEveryNode(ctx context.Context, t *testing.T, pods []*corev1.Pod, network string, svc netip.AddrPort) {
	t.Helper()
	for node, local := range byNode(pods) {
		client := tr.c.podNetNS(ctx, t, local[0], "stub")
		tally := servedByAll(ctx, t, client, local, network, svc)
		t.Logf("%s to %s from %s on %s: %s", network, svc, local[0].Name, node, tally)
	}
}

// servedByAll waits until a batch of flows of network from the namespace
// at client to svc is answered without a failure, by every pod of pods.
func servedByAll(ctx context.Context, t *testing.T, client string, pods []*corev1.Pod, network string, svc netip.AddrPort) traffic.Tally {
	t.Helper()
	var tally traffic.Tally
	eventually(ctx, t, fmt.Sprintf("%s %s served by every target", network, svc), func(ctx context.Context) error {
		tally = runFlows(ctx, network, traffic.Flows{NetNSPath: client, Addr: svc, Count: 60, Attempts: 3})
		if tally.Errors != 0 {
			return fmt.Errorf("%s", tally)
		}
		for _, p := range pods {
			if tally.Answers[p.Name] == 0 {
				return fmt.Errorf("%s did not answer: %s", p.Name, tally)
			}
		}
		return nil
	})
	return tally
}

// proberOn starts probing the IPv4 VIP over TCP from the external host,
// a new connection every 10 ms, until the returned function stops it and
// returns the series.
func (tr *trench) proberOn(ctx context.Context, t *testing.T) func() traffic.Series {
	t.Helper()
	addr, local := echoAt(chartVIPs[0])
	return startProber(ctx, t, traffic.ProbeConfig{
		NetNSPath: tr.ext.ns.Path(), Network: "tcp", Addr: addr, Local: local, Interval: 10 * time.Millisecond,
	})
}

// startProber starts probing as cfg says until the returned function
// stops it and returns the series (at the latest when t ends).
func startProber(ctx context.Context, t *testing.T, cfg traffic.ProbeConfig) func() traffic.Series {
	t.Helper()
	p, err := traffic.StartProber(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() traffic.Series {
		if stopped {
			return nil
		}
		stopped = true
		return p.Stop()
	}
	t.Cleanup(func() { stop() })
	return stop
}

// proxyBridge returns the proxy's bridge addresses.
func (tr *trench) proxyBridge(ctx context.Context, t *testing.T, proxy *corev1.Pod) []string {
	var out []string
	for _, a := range tr.c.podAddrs(ctx, t, proxy, proxyContainer, chartBridgeName) {
		if !a.IP.IsLinkLocalUnicast() {
			out = append(out, a.String())
		}
	}
	slices.Sort(out)
	return out
}

// replaceIPAM deletes the IPAM's pod; the StatefulSet brings it back on
// the same volume. The proxy stays Ready with its bridge addresses and the
// targets keep theirs; a target replaced afterwards gets addresses nobody
// holds, which only an IPAM that kept its allocations gives.
func (tr *trench) replaceIPAM(ctx context.Context, t *testing.T) {
	proxy := tr.c.waitProxyReady(ctx, t)
	bridge := tr.proxyBridge(ctx, t, proxy)
	before := tr.targetAddrs(ctx, t)
	ipam, err := tr.c.client.CoreV1().Pods(chartNamespace).Get(ctx, "ipam-"+chartRelease+"-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tr.c.deletePod(ctx, t, ipam, "app.kubernetes.io/component=ipam")
	t.Logf("FIGURE: IPAM pod deleted to its replacement Ready: %.1f s", time.Since(start).Seconds())
	proxy = tr.c.waitProxyReady(ctx, t)
	if got := tr.proxyBridge(ctx, t, proxy); !slices.Equal(got, bridge) {
		t.Errorf("the proxy's bridge had %v, now %v", bridge, got)
	}
	checkKept(t, before, tr.targetAddrs(ctx, t))
	tr.replaceTarget(ctx, t)
}

// replaceProxy deletes the proxy's pod while the external host probes the
// VIP; the DaemonSet brings it back: the targets keep their addresses and
// traffic comes back.
func (tr *trench) replaceProxy(ctx context.Context, t *testing.T) {
	proxy := tr.c.waitProxyReady(ctx, t)
	bridge := tr.proxyBridge(ctx, t, proxy)
	before := tr.targetAddrs(ctx, t)
	stop := tr.proberOn(ctx, t)
	time.Sleep(time.Second)
	start := time.Now()
	proxy = tr.c.deletePod(ctx, t, proxy, "app.kubernetes.io/component=proxy-load-balancer")
	ready := time.Since(start)
	tr.waitServed(ctx, t)
	time.Sleep(time.Second)
	series := stop()
	if got := tr.proxyBridge(ctx, t, proxy); !slices.Equal(got, bridge) {
		t.Errorf("the proxy's bridge had %v, now %v", bridge, got)
	}
	checkKept(t, before, tr.targetAddrs(ctx, t))
	if len(series.After(start)) == 0 || !series[len(series)-1].OK() {
		t.Fatalf("traffic did not come back: %v", series.LongestGap())
	}
	t.Logf("FIGURE: proxy pod replaced: new pod Ready after %.1f s; probe outage %s, %d of %d probes lost",
		ready.Seconds(), series.LongestGap().Len().Round(time.Millisecond), series.Failures(), len(series))
}

// replaceNSM replaces NSM's pods of each node in turn (replaceNSMOf).
func (tr *trench) replaceNSM(ctx context.Context, t *testing.T) {
	for _, node := range tr.c.nodes(ctx, t) {
		t.Run(node.Name, func(t *testing.T) { tr.replaceNSMOf(ctx, t, node.Name) })
	}
}

// replaceNSMOf deletes the NSMgr's and the forwarder's pods of node while
// the external host probes the VIP: traffic is not cut until both are
// Ready again and the proxies with them (the data path is the kernel's),
// and everything turns Ready by itself. The connections then heal through
// the new NSMgr (each re-requested as it is); the probes run 15 s more so
// that a heal that breaks a path is seen. Neither window may have a gap
// longer than a blip (maxBlip).
func (tr *trench) replaceNSMOf(ctx context.Context, t *testing.T, node string) {
	tr.c.waitProxyReady(ctx, t)
	before := tr.targetAddrs(ctx, t)
	stop := tr.proberOn(ctx, t)
	time.Sleep(time.Second)
	start := time.Now()
	pods := tr.c.client.CoreV1().Pods("nsm-system")
	var old []*corev1.Pod
	for _, app := range []string{"nsmgr", "forwarder"} {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=" + app, FieldSelector: "spec.nodeName=" + node})
		if err != nil || len(list.Items) != 1 {
			t.Fatalf("%s pods on %s: %v, %d", app, node, err, len(list.Items))
		}
		old = append(old, &list.Items[0])
	}
	for _, p := range old {
		if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range old {
		tr.c.waitReplacedOn(ctx, t, p, "app="+p.Labels["app"])
	}
	ready := time.Since(start)
	tr.c.waitProxyReady(ctx, t)
	back := time.Now()
	time.Sleep(15 * time.Second)
	tr.waitServed(ctx, t)
	series := stop()
	checkKept(t, before, tr.targetAddrs(ctx, t))
	outage, heals := series.Before(back), series.After(back)
	t.Logf("FIGURE: NSMgr and forwarder pods of %s replaced: both Ready after %.1f s; %d of %d probes lost until then and the proxy Ready, %d of %d in the 15 s of heals after (longest gap %s)",
		node, ready.Seconds(), outage.Failures(), len(outage), heals.Failures(), len(heals), heals.LongestGap().Len().Round(time.Millisecond))
	failed := !noOutage(t, outage, "NSM's pods were replaced", start)
	if !noOutage(t, heals, "the connections healed through the new NSMgr", back) {
		failed = true
	}
	if failed {
		tr.logPods(ctx, t, "nsm-system", "app in (nsmgr,forwarder)")
		tr.logPods(ctx, t, chartNamespace, "app.kubernetes.io/instance="+chartRelease+",app.kubernetes.io/component notin (ipam,nsp)")
		tr.logStubs(ctx, t)
	}
}

// maxBlip is the longest gap in a series of probes that is not an outage.
// Now and then, in any scenario, a few probes of 10 ms time out within a
// few tens of ms, interleaved with answered ones (seen even before a
// scenario changed anything; the cause is not known yet): the longest gap
// such a blip made was 11 ms. An outage of the data path is seconds.
const maxBlip = 50 * time.Millisecond

// noOutage fails t when series has a gap that failed probes witnessed for
// longer than maxBlip (Gap.Witnessed: a prober held up on the busy machine
// after one failed probe makes a long gap that no probe saw; one of 229 ms
// was seen) or one that never ended, and logs the probes lost in blips; it
// reports whether the series passed.
func noOutage(t *testing.T, series traffic.Series, while string, from time.Time) bool {
	t.Helper()
	if series.Failures() == 0 {
		return true
	}
	if g := series.LongestWitnessed(); g.Witnessed() > maxBlip || g.Open {
		t.Errorf("traffic cut for %s while %s (from %s): %s", g, while, from.Format(time.RFC3339Nano), lostProbes(series))
		return false
	}
	t.Logf("%d probes lost in blips of at most %s while %s: %s", series.Failures(), maxBlip, while, lostProbes(series))
	return true
}

// noOutages checks each series of probeEveryVIP with noOutage and
// returns them summed (sumSeries).
func noOutages(t *testing.T, series map[string]traffic.Series, while string, from time.Time) (lost, total int, longest time.Duration) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(series)) {
		noOutage(t, series[name], while+" ("+name+")", from)
	}
	return sumSeries(series)
}

// sumSeries returns the probes lost in the series of probeEveryVIP, of
// how many, and the longest gap of them all.
func sumSeries(series map[string]traffic.Series) (lost, total int, longest time.Duration) {
	for _, s := range series {
		lost, total = lost+s.Failures(), total+len(s)
		longest = max(longest, s.LongestGap().Len())
	}
	return lost, total, longest
}

// logPods logs the last lines of the logs of the pods of selector in
// namespace (a failed check: what each component said meanwhile).
func (tr *trench) logPods(ctx context.Context, t *testing.T, namespace, selector string) {
	list, err := tr.c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Log(err)
		return
	}
	for i := range list.Items {
		t.Logf("%s/%s:\n%s", namespace, list.Items[i].Name, lastLines(tr.c.logs(ctx, &list.Items[i]), 40))
	}
}

// waitReplaced waits, after pod was deleted, until another pod of
// selector in its namespace is Ready, and returns it.
func (c *cluster) waitReplaced(ctx context.Context, t *testing.T, pod *corev1.Pod, selector string) *corev1.Pod {
	t.Helper()
	return c.waitReplacedWhere(ctx, t, pod, metav1.ListOptions{LabelSelector: selector})
}

// waitReplacedOn is waitReplaced for a pod of a DaemonSet: its
// replacement is the new pod of selector on pod's node.
func (c *cluster) waitReplacedOn(ctx context.Context, t *testing.T, pod *corev1.Pod, selector string) *corev1.Pod {
	t.Helper()
	return c.waitReplacedWhere(ctx, t, pod, metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + pod.Spec.NodeName})
}

func (c *cluster) waitReplacedWhere(ctx context.Context, t *testing.T, pod *corev1.Pod, opts metav1.ListOptions) *corev1.Pod {
	t.Helper()
	var next *corev1.Pod
	eventually(ctx, t, "a new pod of "+opts.LabelSelector+" Ready", func(ctx context.Context) error {
		list, err := c.client.CoreV1().Pods(pod.Namespace).List(ctx, opts)
		if err != nil {
			return err
		}
		for i := range list.Items {
			if p := &list.Items[i]; p.UID != pod.UID && p.DeletionTimestamp == nil && podReady(p) {
				next = p
				return nil
			}
		}
		return fmt.Errorf("none Ready yet")
	})
	return next
}

// lostProbes lists the failed probes of series, each with its start and
// error, the first ten of them.
func lostProbes(series traffic.Series) string {
	var out []string
	for _, p := range series {
		if !p.OK() && len(out) < 10 {
			out = append(out, p.Start.UTC().Format("15:04:05.000")+" "+p.Err.Error())
		}
	}
	return strings.Join(out, "; ")
}
