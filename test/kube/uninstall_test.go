package kube_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podBridge is the bridge of the cluster's pod network in each node's root
// namespace (scripts/cluster/lib.sh): its ports come and go with pods.
const podBridge = "cw-cni0"

// rootState describes every node's root network namespace as the chart
// could change it: its links, rules and routes, leaving out the pods' own
// links (ports of the pod bridge) and the routes on them; each line starts
// with the node's name.
func rootState(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, node := range clusterNodes(t) {
		withHandle(t, nodeNetNS(t, node), func(h *netlink.Handle) {
			for _, l := range nodeRootState(t, h) {
				out = append(out, node+" "+l)
			}
		})
	}
	return out
}

// nodeRootState is rootState of the node of handle h, sorted.
func nodeRootState(t *testing.T, h *netlink.Handle) []string {
	t.Helper()
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	podLinks := map[int]bool{}
	var out []string
	var bridge int
	for _, l := range links {
		if l.Attrs().Name == podBridge {
			bridge = l.Attrs().Index
		}
	}
	for _, l := range links {
		if bridge != 0 && l.Attrs().MasterIndex == bridge {
			podLinks[l.Attrs().Index] = true
			continue
		}
		out = append(out, "link "+l.Attrs().Name+" "+l.Type())
	}
	rules, err := h.RuleList(netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		out = append(out, "rule "+r.String())
	}
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: 0}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if !podLinks[r.LinkIndex] {
			out = append(out, fmt.Sprintf("route table %d proto %d %s", r.Table, r.Protocol, r.String()))
		}
	}
	slices.Sort(out)
	return out
}

// upgradeUninstall: helm upgrade to another tag of the same images while
// the external host probes the VIP (the loss as a figure; traffic comes
// back; the proxy moved in place by the chart's upgrade hook, the IPAM's
// and the nsp's pods replaced), then helm uninstall and the stubs gone:
// nothing of the release is left in the cluster, and the node's root
// namespace is as before the install.
func (tr *trench) upgradeUninstall(ctx context.Context, t *testing.T) {
	tag := os.Getenv("CAUSEWAY_IMAGE_TAG")
	next := tag + "-upgrade"
	for _, b := range []string{"proxy", "ipam", "nsp"} {
		ref := "localhost/causeway/" + b
		ctrImages(t, "tag", "--force", ref+":"+tag, ref+":"+next)
		t.Cleanup(func() {
			ctrImagesAll(t, "rm", ref+":"+next)
		})
	}
	stop := tr.proberOn(ctx, t)
	time.Sleep(time.Second)
	start := time.Now()
	out := helm(t, "upgrade", chartRelease, repoPath("deployments/helm/causeway"), "--namespace", chartNamespace, "--reuse-values",
		"--set-string", "images.proxy.tag="+next+",images.ipam.tag="+next+",images.nsp.tag="+next)
	hookSaid(t, out, hookInPlace, "only container images")
	want := 2 + len(tr.c.nodes(ctx, t)) // the IPAM, the nsp, a proxy per node
	eventually(ctx, t, "every pod of the chart on the new tag and Ready", func(ctx context.Context) error {
		// The upgrade Job's pod and its report's, done, are not the chart's workloads.
		list, err := tr.c.client.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/instance=" + chartRelease + ",app.kubernetes.io/component notin (upgrade,upgrade-report)"})
		if err != nil {
			return err
		}
		for _, p := range list.Items {
			for _, ctr := range p.Spec.Containers {
				if !strings.HasSuffix(ctr.Image, ":"+next) || !podReady(&p) {
					return fmt.Errorf("%s: %s, ready %v", p.Name, ctr.Image, podReady(&p))
				}
			}
		}
		if len(list.Items) != want {
			return fmt.Errorf("%d pods, want %d", len(list.Items), want)
		}
		return nil
	})
	rolled := time.Since(start)
	tr.waitServed(ctx, t)
	series := stop()
	t.Logf("FIGURE: helm upgrade to a new image tag (the proxy in place): every pod Ready on it after %.1f s; %d of %d probes lost (longest gap %s)",
		rolled.Seconds(), series.Failures(), len(series), series.LongestGap().Len().Round(time.Millisecond))

	helm(t, "uninstall", chartRelease, "--namespace", chartNamespace, "--wait")
	tr.c.stopStubs(t)
	tr.c.waitClaimGone(t, chartNamespace, "ipam-data-ipam-"+chartRelease+"-0")
	eventually(ctx, t, "nothing of the release left in the cluster", func(ctx context.Context) error {
		return tr.c.releaseLeft(ctx)
	})
	if got := rootState(t); !slices.Equal(got, tr.root) {
		t.Errorf("the node's root namespace changed:\nbefore %q\nafter  %q", tr.root, got)
	}
}

// releaseLeft says what of the release is left in its namespace: pods,
// claims, endpoint slices, services, config maps (but the namespace's CA),
// the chart's service accounts, workloads.
func (c *cluster) releaseLeft(ctx context.Context) error {
	ns, all := chartNamespace, metav1.ListOptions{}
	core, apps := c.client.CoreV1(), c.client.AppsV1()
	var left []string
	var errs []error
	add := func(kind string, metas []metav1.ObjectMeta, err error) {
		errs = append(errs, err)
		for _, m := range metas {
			if m.Name != "kube-root-ca.crt" {
				left = append(left, kind+" "+m.Name)
			}
		}
	}
	pods, err := core.Pods(ns).List(ctx, all)
	add("pod", metas(pods.Items, func(o corev1.Pod) metav1.ObjectMeta { return o.ObjectMeta }), err)
	claims, err := core.PersistentVolumeClaims(ns).List(ctx, all)
	add("claim", metas(claims.Items, func(o corev1.PersistentVolumeClaim) metav1.ObjectMeta { return o.ObjectMeta }), err)
	eps, err := c.client.DiscoveryV1().EndpointSlices(ns).List(ctx, all)
	add("endpointslice", metas(eps.Items, func(o discoveryv1.EndpointSlice) metav1.ObjectMeta { return o.ObjectMeta }), err)
	svcs, err := core.Services(ns).List(ctx, all)
	add("service", metas(svcs.Items, func(o corev1.Service) metav1.ObjectMeta { return o.ObjectMeta }), err)
	cms, err := core.ConfigMaps(ns).List(ctx, all)
	add("configmap", metas(cms.Items, func(o corev1.ConfigMap) metav1.ObjectMeta { return o.ObjectMeta }), err)
	sas, err := core.ServiceAccounts(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + chartRelease})
	add("serviceaccount", metas(sas.Items, func(o corev1.ServiceAccount) metav1.ObjectMeta { return o.ObjectMeta }), err)
	dss, err := apps.DaemonSets(ns).List(ctx, all)
	add("daemonset", metas(dss.Items, func(o appsv1.DaemonSet) metav1.ObjectMeta { return o.ObjectMeta }), err)
	sss, err := apps.StatefulSets(ns).List(ctx, all)
	add("statefulset", metas(sss.Items, func(o appsv1.StatefulSet) metav1.ObjectMeta { return o.ObjectMeta }), err)
	deps, err := apps.Deployments(ns).List(ctx, all)
	add("deployment", metas(deps.Items, func(o appsv1.Deployment) metav1.ObjectMeta { return o.ObjectMeta }), err)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(left) != 0 {
		return fmt.Errorf("left: %v", left)
	}
	return nil
}

// metas returns the object metadata of items.
func metas[T any](items []T, meta func(T) metav1.ObjectMeta) []metav1.ObjectMeta {
	out := make([]metav1.ObjectMeta, 0, len(items))
	for _, o := range items {
		out = append(out, meta(o))
	}
	return out
}

// ctrImages runs `ctr images ARGS` on every node's containerd.
func ctrImages(t *testing.T, args ...string) {
	t.Helper()
	for _, node := range clusterNodes(t) {
		out, err := exec.Command("ctr", append([]string{"--address", containerdSock(node), "-n", "k8s.io", "images"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctr images %v on node %s: %v: %s", args, node, err, out)
		}
	}
}

// ctrImagesAll runs `ctr images ARGS` on every node's containerd, for a
// clean-up: errors ignored.
func ctrImagesAll(t *testing.T, args ...string) {
	for _, node := range clusterNodes(t) {
		_ = exec.Command("ctr", append([]string{"--address", containerdSock(node), "-n", "k8s.io", "images"}, args...)...).Run()
	}
}
