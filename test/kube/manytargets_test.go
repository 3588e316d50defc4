package kube_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// manyTargets is how many target pods TargetsAtScale runs
// (CAUSEWAY_KUBE_MANY_TARGETS to change it).
const manyTargets = 100

// manyTargetsCPU is the targets' CPU request while TargetsAtScale runs:
// at the stubs' usual 50m, 100 of them ask for 5 of the machine's 6
// cores (three nodes of its two), leaving no room for the rest.
const manyTargetsCPU = "10m"

// scaleToMany (three nodes or more; skipped on fewer): the targets'
// Deployment scaled to manyTargets pods spread over the nodes: every
// target connects and answers on every VIP, each holds one address of
// each family that no other holds, every node's proxy serves its node's
// targets (a bridge port each), NSM's registry still holds the proxies'
// and the LBs' endpoints; the time from the scale to all served, and the
// proxies' and the registry's memory before and after, are figures. The
// targets go back to targetReplicas at the end.
func (tr *trench) scaleToMany(ctx context.Context, t *testing.T) {
	nodes := tr.c.nodes(ctx, t)
	if len(nodes) < 3 {
		t.Skip("many targets over three nodes: CLUSTER_NODES=3 make cluster")
	}
	n := manyTargets
	if v := os.Getenv("CAUSEWAY_KUBE_MANY_TARGETS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("CAUSEWAY_KUBE_MANY_TARGETS=%q: a number of targets", v)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	proxies := tr.c.proxyPods(ctx, t)
	registry := tr.c.runningPods(ctx, t, nsmNamespace, "app=registry")
	memBefore := tr.c.memories(ctx, t, append(proxies, registry...))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		tr.c.scaleTargetsTo(ctx, t, targetReplicas)
		tr.c.setTargetsCPU(ctx, t, stubCPU)
		tr.c.stubPods(ctx, t, targetsName, targetReplicas, "target connected")
	})

	start := time.Now()
	tr.c.setTargetsCPU(ctx, t, manyTargetsCPU)
	tr.c.scaleTargetsTo(ctx, t, n)
	pods := tr.c.stubPods(ctx, t, targetsName, n, "target connected")
	connected := time.Since(start)
	tr.waitServedBy(ctx, t, chartVIPs, podNames(pods))
	served := time.Since(start)

	addrs := tr.addrsOf(ctx, t, pods)
	checkUnique(t, addrs)
	perNode := map[string]int{}
	for _, p := range pods {
		perNode[p.Spec.NodeName]++
	}
	for _, p := range tr.c.proxyPods(ctx, t) {
		want := perNode[p.Spec.NodeName] + len(tr.ext.lbs)
		if got := bridgePorts(t, tr.c.podNetNS(ctx, t, p, proxyContainer)); got != want {
			t.Errorf("%s's bridge has %d ports, want %d (its node's targets and the LBs)", p.Name, got, want)
		}
	}
	for service, want := range map[string]int{conduitService: len(tr.ext.lbs), proxyService: len(nodes)} {
		if names, err := tr.c.endpointsOf(ctx, service); err != nil || len(names) != want {
			t.Errorf("NSM's registry has the endpoints %v (%v) for %s, want %d", names, err, service, want)
		}
	}
	memAfter := tr.c.memories(ctx, t, append(tr.c.proxyPods(ctx, t), tr.c.runningPods(ctx, t, nsmNamespace, "app=registry")...))
	t.Logf("FIGURE: %d targets over %d nodes (%v): every target connected after %.1f s, every one answering on every VIP after %.1f s",
		n, len(nodes), perNode, connected.Seconds(), served.Seconds())
	t.Logf("FIGURE: memory (VmRSS) with %d targets: %s; with %d: %s", targetReplicas, memBefore, n, memAfter)
}

// setTargetsCPU sets the CPU request of the targets' stub container; the
// Deployment rolls its pods.
func (c *cluster) setTargetsCPU(ctx context.Context, t *testing.T, cpu string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"stub","resources":{"requests":{"cpu":%q}}}]}}}}`, cpu)
	if _, err := c.client.AppsV1().Deployments(chartNamespace).Patch(ctx, targetsName, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("the targets' CPU request %s: %v", cpu, err)
	}
}

// memories returns the resident memory of the first container of each
// pod, as "pod: N MiB" joined.
func (c *cluster) memories(ctx context.Context, t *testing.T, pods []*corev1.Pod) string {
	t.Helper()
	var out []string
	for _, p := range pods {
		path := c.podNetNS(ctx, t, p, p.Spec.Containers[0].Name)
		status := strings.TrimSuffix(path, "/ns/net") + "/status"
		out = append(out, fmt.Sprintf("%s %s", p.Name, vmRSS(t, status)))
	}
	return strings.Join(out, ", ")
}

// vmRSS reads VmRSS from a /proc/PID/status file, as "N.N MiB".
func vmRSS(t *testing.T, status string) string {
	t.Helper()
	f, err := os.Open(status)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err == nil {
				return fmt.Sprintf("%.1f MiB", float64(kb)/1024)
			}
		}
	}
	t.Fatalf("no VmRSS in %s", status)
	return ""
}
