package kube_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// TestUpgradeInPlace: the proxy's upgrades as an operator makes them with
// the chart's defaults (the proxy DaemonSets OnDelete, the chart's upgrade
// hook), with TCP and UDP probes through every VIP from the external
// host: helm upgrade to a new image tag (the chart's hook patches each
// node's proxy pod's image, one node at a time: the same pod, the same
// network namespace, its container restarted), helm rollback to the first
// tag (in place again), one node's proxy container killed and restarted by
// the kubelet (the other nodes' proxies untouched), and an upgrade that
// must replace the pods (a new memory limit). helm prints what the hook
// did and why. Each one's loss is a figure, the in-place ones beside the
// replacement; on any number of nodes (CLUSTER_NODES).
func TestUpgradeInPlace(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	tr := c.startTrench(ctx, t)
	tr.waitServed(ctx, t)
	tr.c.checkProxyStrategy(ctx, t, appsv1.OnDeleteDaemonSetStrategyType)
	tag := os.Getenv("CAUSEWAY_IMAGE_TAG")
	next := tag + "-inplace"
	for _, b := range []string{"proxy", "ipam", "nsp"} {
		ref := "localhost/causeway/" + b
		ctrImages(t, "tag", "--force", ref+":"+tag, ref+":"+next)
		t.Cleanup(func() {
			ctrImagesAll(t, "rm", ref+":"+next)
		})
	}
	setTags := func(tag string) []string {
		return []string{"--set-string", "images.proxy.tag=" + tag + ",images.ipam.tag=" + tag + ",images.nsp.tag=" + tag}
	}
	t.Run("HelmUpgrade", func(t *testing.T) {
		tr.changeProxy(ctx, t, "helm upgrade to a new image tag, in place", true, next, allProxies, func([]*corev1.Pod) {
			out := helm(t, append([]string{"upgrade", chartRelease, repoPath("deployments/helm/causeway"), "--namespace", chartNamespace,
				"--reuse-values"}, setTags(next)...)...)
			hookSaid(t, out, hookInPlace, "only container images")
		})
	})
	t.Run("HelmRollback", func(t *testing.T) {
		tr.changeProxy(ctx, t, "helm rollback to the first image tag, in place", true, tag, allProxies, func([]*corev1.Pod) {
			// Revision 1: the install, on the first tag. With Helm 4's
			// --wait (kstatus), which waits for the DaemonSets' pods to be
			// updated: the release's upgrade Job updates them meanwhile.
			out := helm(t, "rollback", chartRelease, "1", "--namespace", chartNamespace, "--wait", "--timeout", "5m")
			hookSaid(t, out, hookInPlace, "only container images")
		})
	})
	t.Run("ContainerKilled", func(t *testing.T) {
		first := func(pods []*corev1.Pod) []*corev1.Pod { return pods[:1] }
		tr.changeProxy(ctx, t, "proxy container killed, restarted by the kubelet", true, tag, first, func(picked []*corev1.Pod) {
			proxy := picked[0]
			out, err := exec.CommandContext(ctx, "ctr", "--address", containerdSock(proxy.Spec.NodeName), "-n", "k8s.io", "tasks", "kill",
				"--signal", "SIGKILL", runtimeID(proxy, proxyContainer)).CombinedOutput()
			if err != nil {
				t.Fatalf("kill the proxy container: %v: %s", err, out)
			}
		})
	})
	t.Run("UpgradeReplacingThePod", func(t *testing.T) {
		tr.changeProxy(ctx, t, "helm upgrade that cannot be made in place (a new memory limit), pod replaced", false, next, allProxies, func([]*corev1.Pod) {
			out := helm(t, append([]string{"upgrade", chartRelease, repoPath("deployments/helm/causeway"), "--namespace", chartNamespace,
				"--reuse-values", "--set", "proxy.resources.limits.memory=160Mi"}, setTags(next)...)...)
			hookSaid(t, out, hookReplaced, "spec.containers[proxy].resources")
		})
	})
}

// checkProxyStrategy: every proxy DaemonSet of the chart's release has
// the update strategy want.
func (c *cluster) checkProxyStrategy(ctx context.Context, t *testing.T, want appsv1.DaemonSetUpdateStrategyType) {
	t.Helper()
	list, err := c.client.AppsV1().DaemonSets(chartNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=" + chartRelease + ",causeway.io/conduit"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) == 0 {
		t.Fatal("no proxy DaemonSet")
	}
	for _, ds := range list.Items {
		if got := ds.Spec.UpdateStrategy.Type; got != want {
			t.Errorf("DaemonSet %s: update strategy %s, want %s", ds.Name, got, want)
		}
	}
}

// The actions the upgrade hook logs (pkg/upgrade's Action; not imported:
// its configuration's dependencies would join the suite's module).
const (
	hookInPlace  = "in place"
	hookReplaced = "replaced"
)

// hookSaid: the output of helm upgrade or rollback holds the upgrade
// hook's log (the chart's hook-output-log-policy) of a pod given action,
// for a reason that contains reason. Helm 4 writes the log as the message
// of one record of its own log (its quotes and newlines escaped), Helm 3
// as it is.
func hookSaid(t *testing.T, out, action, reason string) {
	t.Helper()
	unescaped := strings.NewReplacer(`\"`, `"`, `\n`, "\n").Replace(out)
	for _, line := range strings.Split(unescaped, "\n") {
		if strings.Contains(line, `"msg":"upgrading pod"`) && strings.Contains(line, `"action":"`+action+`"`) &&
			strings.Contains(line, reason) {
			t.Logf("the upgrade hook: %s", line)
			return
		}
	}
	t.Errorf("helm's output has no line of the upgrade hook's %q for %q:\n%s", action, reason, out)
}

// proxyRun is a node's proxy as it ran before a change.
type proxyRun struct {
	pod    *corev1.Pod
	bridge []string
	netns  uint64
	ctr    string
}

// allProxies is changeProxy's choice of every node's proxy.
func allProxies(pods []*corev1.Pod) []*corev1.Pod { return pods }

// changeProxy runs change on the proxies which picks (of every node's
// Ready proxy, sorted by name) while every VIP is probed (TCP and UDP),
// and waits until each picked node's proxy is Ready on image tag tag with
// its container restarted: in the same pod and network namespace when
// inPlace, in a new pod otherwise; the other nodes' proxies keep running
// as they were. Every node's bridge keeps its addresses and the targets
// theirs; traffic comes back; the probes lost are reported, and a cut of
// over a second is traced.
func (tr *trench) changeProxy(ctx context.Context, t *testing.T, what string, inPlace bool, tag string,
	picks func([]*corev1.Pod) []*corev1.Pod, change func(picked []*corev1.Pod)) {
	t.Helper()
	runs := map[string]proxyRun{}
	pods := tr.c.proxyPods(ctx, t)
	for _, p := range pods {
		runs[p.Spec.NodeName] = proxyRun{pod: p, bridge: tr.proxyBridge(ctx, t, p),
			netns: nsInode(t, tr.c.podNetNS(ctx, t, p, proxyContainer)), ctr: runtimeID(p, proxyContainer)}
	}
	picked := picks(pods)
	changed := map[string]bool{}
	for _, p := range picked {
		changed[p.Spec.NodeName] = true
	}
	before := tr.targetAddrs(ctx, t)
	stop := tr.probeEveryVIP(ctx, t)
	time.Sleep(time.Second)
	start := time.Now()
	change(picked)
	var now map[string]*corev1.Pod
	eventually(ctx, t, fmt.Sprintf("the proxy Ready on %s with its container restarted on %d node(s)", tag, len(changed)), func(ctx context.Context) error {
		var err error
		if now, err = tr.c.proxiesByNode(ctx); err != nil {
			return err
		}
		for node := range changed {
			p := now[node]
			switch {
			case p == nil:
				return fmt.Errorf("no proxy pod on %s", node)
			case !strings.HasSuffix(upgradedContainer(p, proxyContainer).Image, ":"+tag):
				return fmt.Errorf("%s runs %s", p.Name, upgradedContainer(p, proxyContainer).Image)
			case runtimeID(p, proxyContainer) == runs[node].ctr:
				return fmt.Errorf("%s: container %s not restarted yet", p.Name, runs[node].ctr)
			case !podReady(p):
				return fmt.Errorf("%s not Ready", p.Name)
			}
		}
		return nil
	})
	ready := time.Since(start)
	tr.waitServed(ctx, t)
	time.Sleep(time.Second)
	series := stop()
	now, err := tr.c.proxiesByNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for node, run := range runs {
		tr.checkProxyRun(ctx, t, what, run, now[node], changed[node], inPlace)
	}
	checkKept(t, before, tr.targetAddrs(ctx, t))
	longest := reportProbes(t, what, series)
	t.Logf("FIGURE: %s: %d proxy(ies) Ready after %.1f s; longest gap %s", what, len(changed), ready.Seconds(),
		longest.Len().Round(time.Millisecond))
	if inPlace {
		var restarted []*corev1.Pod
		for node := range changed {
			restarted = append(restarted, now[node])
		}
		tr.c.traceGap(ctx, t, what, longest, restarted, proxyContainer, start)
	}
}

// checkProxyRun: a node's proxy now, after a change, against run, the
// one before: restarted (in the same pod and namespace when inPlace) if
// changed, else the same container; its bridge's addresses kept.
func (tr *trench) checkProxyRun(ctx context.Context, t *testing.T, what string, run proxyRun, now *corev1.Pod, changed, inPlace bool) {
	t.Helper()
	if now == nil {
		t.Errorf("%s: no proxy pod on %s", what, run.pod.Spec.NodeName)
		return
	}
	switch kept := now.UID == run.pod.UID; {
	case !changed && (!kept || runtimeID(now, proxyContainer) != run.ctr):
		t.Errorf("%s: %s's proxy %s changed (now %s, container %s), though not picked", what, run.pod.Spec.NodeName,
			run.pod.Name, now.Name, runtimeID(now, proxyContainer))
	case changed && kept != inPlace:
		t.Errorf("%s: pod %s (%s) now %s (%s): kept %v, want %v", what, run.pod.Name, run.pod.UID, now.Name, now.UID, kept, inPlace)
	case changed && inPlace && nsInode(t, tr.c.podNetNS(ctx, t, now, proxyContainer)) != run.netns:
		t.Errorf("%s: the network namespace of %s changed", what, now.Name)
	}
	if got := tr.proxyBridge(ctx, t, now); !slices.Equal(got, run.bridge) {
		t.Errorf("%s: the bridge of %s had %v, now %v", what, now.Name, run.bridge, got)
	}
}

// reportProbes logs each series' loss and the sum as FIGURE lines, fails
// for a series whose traffic did not come back, and returns the longest
// gap of them all.
func reportProbes(t *testing.T, what string, series map[string]traffic.Series) traffic.Gap {
	t.Helper()
	lost, total := 0, 0
	var longest traffic.Gap
	for _, name := range slices.Sorted(maps.Keys(series)) {
		s := series[name]
		if len(s) == 0 || !s[len(s)-1].OK() {
			t.Errorf("%s: %s traffic did not come back: %v", what, name, s.LongestGap())
		}
		lost, total = lost+s.Failures(), total+len(s)
		if g := s.LongestGap(); g.Len() > longest.Len() {
			longest = g
		}
		t.Logf("FIGURE: %s (%s): %d of %d probes lost, longest gap %s", what, name, s.Failures(), len(s), s.LongestGap().Len().Round(time.Millisecond))
	}
	t.Logf("FIGURE: %s: %d of %d probes lost (TCP and UDP through every VIP), longest gap %s",
		what, lost, total, longest.Len().Round(time.Millisecond))
	return longest
}

// proxiesByNode returns the proxy pods not being deleted, by node.
func (c *cluster) proxiesByNode(ctx context.Context) (map[string]*corev1.Pod, error) {
	list, err := c.client.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{LabelSelector: proxySelector})
	if err != nil {
		return nil, err
	}
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		if p := &list.Items[i]; p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = p
		}
	}
	return out, nil
}

// probeEveryVIP probes every VIP over TCP and UDP from the external host
// until the returned function stops them and returns their series, by
// "<vip> <network>".
func (tr *trench) probeEveryVIP(ctx context.Context, t *testing.T) func() map[string]traffic.Series {
	t.Helper()
	return tr.probeVIPs(ctx, t, chartVIPs)
}

// probeVIPs is probeEveryVIP of vips.
func (tr *trench) probeVIPs(ctx context.Context, t *testing.T, vips []netip.Addr) func() map[string]traffic.Series {
	t.Helper()
	stops := map[string]func() traffic.Series{}
	for _, vip := range vips {
		addr, local := echoAt(vip)
		for _, network := range []string{"tcp", "udp"} {
			stops[vip.String()+" "+network] = startProber(ctx, t, traffic.ProbeConfig{
				NetNSPath: tr.ext.ns.Path(), Network: network, Addr: addr, Local: local, Interval: 10 * time.Millisecond,
			})
		}
	}
	return func() map[string]traffic.Series {
		out := map[string]traffic.Series{}
		for name, stop := range stops {
			out[name] = stop()
		}
		return out
	}
}

// upgradedContainer is the named container of pod (empty when it has none).
func upgradedContainer(pod *corev1.Pod, name string) corev1.Container {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	return corev1.Container{}
}

// runtimeID is the runtime's id of the named container of pod, without
// its scheme.
func runtimeID(pod *corev1.Pod, name string) string {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == name {
			_, id, _ := strings.Cut(s.ContainerID, "://")
			return id
		}
	}
	return ""
}

// nsInode identifies the namespace at path.
func nsInode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
