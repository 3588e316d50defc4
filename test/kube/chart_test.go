package kube_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cluster's tools and containerd (scripts/cluster).
const (
	helmPath        = "/var/lib/causeway-cluster/bin/helm"
	containerdSock  = "/run/causeway-cluster/containerd/containerd.sock"
	chartNamespace  = "red"
	chartRelease    = "trench-a"
	chartExample    = "deployments/helm/examples/trench-a.yaml"
	proxyContainer  = "proxy"
	chartIPv4Pool   = "172.16.0.0/16"
	chartIPv6Pool   = "fd00::/48"
	chartBridgeName = "bridge0"
)

// helm runs the cluster's helm.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(helmPath, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfigPath())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// installChart installs the chart as a user does: the example values, the
// images of this clone (loaded by make test-kube with CAUSEWAY_IMAGE_TAG)
// and the cluster's own sysctl image, after registering the chart's service
// accounts with SPIRE. It uninstalls it when t ends.
func (c *cluster) installChart(ctx context.Context, t *testing.T) {
	t.Helper()
	tag := os.Getenv("CAUSEWAY_IMAGE_TAG")
	if tag == "" {
		t.Fatal("CAUSEWAY_IMAGE_TAG names the images to install (make test-kube sets it)")
	}
	c.recycleVolumes(t)
	registerSPIFFE(t, chartNamespace, "proxy-"+chartRelease, "ipam-"+chartRelease, "nsp-"+chartRelease)
	busybox := c.image(ctx, t, "busybox")
	repo, btag, _ := strings.Cut(busybox, ":")
	set := []string{
		"images.sysctlInit.repository=" + repo, "images.sysctlInit.tag=" + btag,
	}
	for _, b := range []string{"proxy", "ipam", "nsp"} {
		set = append(set, "images."+b+".repository=localhost/causeway/"+b, "images."+b+".tag="+tag)
	}
	helm(t, "install", chartRelease, repoPath("deployments/helm/causeway"), "--namespace", chartNamespace,
		"--create-namespace", "--values", repoPath(chartExample), "--set", strings.Join(set, ","))
	t.Cleanup(func() {
		// A test that failed before its own uninstall leaves nothing either.
		_ = exec.Command(helmPath, "uninstall", chartRelease, "--namespace", chartNamespace, "--wait", "--ignore-not-found",
			"--kubeconfig", kubeconfigPath()).Run()
		c.waitClaimGone(t, chartNamespace, "ipam-data-ipam-"+chartRelease+"-0")
		c.recycleVolumes(t)
	})
}

// TestChartInstall: the chart installed with the example values and the
// secure defaults (SPIFFE from the cluster's SPIRE): the IPAM and the
// configuration server turn Ready, the IPAM's store is on a volume of the
// default class, and the proxy registers with NSM and puts the IPAM's
// bridge addresses on its bridge; without load balancers its only failing
// check is Egress. After helm uninstall no pod of the chart is left.
func TestChartInstall(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	c.installChart(ctx, t)
	pods := c.client.CoreV1().Pods(chartNamespace)
	var proxy *corev1.Pod
	eventually(ctx, t, "the IPAM and nsp Ready, the proxy waiting for Egress only", func(ctx context.Context) error {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := map[string]bool{}
		for i := range list.Items {
			p := &list.Items[i]
			name := p.Labels["app.kubernetes.io/component"]
			ready[name] = podReady(p)
			if strings.HasPrefix(p.Name, "proxy-") {
				proxy = p
			}
		}
		if !ready["ipam"] || !ready["nsp"] || proxy == nil {
			return fmt.Errorf("pods ready: %v", ready)
		}
		return c.proxyWaitsOnlyFor(ctx, proxy, "Egress")
	})
	t.Logf("FIGURE: helm install to IPAM and nsp Ready, proxy in NSM waiting only for LBs: %.1f s", time.Since(start).Seconds())
	claim, err := c.client.CoreV1().PersistentVolumeClaims(chartNamespace).Get(ctx, "ipam-data-ipam-"+chartRelease+"-0", metav1.GetOptions{})
	if err != nil || claim.Spec.StorageClassName == nil || *claim.Spec.StorageClassName != "local" {
		t.Fatalf("the IPAM's claim: %v, %+v", err, claim)
	}
	addrs := c.podAddrs(ctx, t, proxy, proxyContainer, chartBridgeName)
	for _, pool := range []string{chartIPv4Pool, chartIPv6Pool} {
		_, want, _ := net.ParseCIDR(pool)
		if !containsAny(want, addrs) {
			t.Errorf("%s of the proxy has %v, none from the pool %s", chartBridgeName, addrs, pool)
		}
	}
	helm(t, "uninstall", chartRelease, "--namespace", chartNamespace, "--wait")
	eventually(ctx, t, "nothing of the chart left", func(ctx context.Context) error {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		claims, err := c.client.CoreV1().PersistentVolumeClaims(chartNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if n := len(list.Items) + len(claims.Items); n != 0 {
			return fmt.Errorf("%d pods and %d claims left", len(list.Items), len(claims.Items))
		}
		return nil
	})
}

// proxyWaitsOnlyFor checks that the proxy's readiness fails on the checks
// named and on no other (the kubelet's last probe event says which).
func (c *cluster) proxyWaitsOnlyFor(ctx context.Context, pod *corev1.Pod, checks string) error {
	events, err := c.client.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + pod.Name + ",reason=Unhealthy",
	})
	if err != nil {
		return err
	}
	var last *corev1.Event
	for i := range events.Items {
		e := &events.Items[i]
		if strings.Contains(e.Message, "Readiness") && (last == nil || e.LastTimestamp.After(last.LastTimestamp.Time)) {
			last = e
		}
	}
	if last == nil || !strings.Contains(last.Message, "(not serving: "+checks+")") {
		return fmt.Errorf("the proxy's last readiness event: %v", last)
	}
	return nil
}

// podAddrs returns the addresses of link in the network namespace of pod's
// container (found through the cluster's containerd).
func (c *cluster) podAddrs(ctx context.Context, t *testing.T, pod *corev1.Pod, container, link string) []net.IPNet {
	t.Helper()
	var id string
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == container {
			_, id, _ = strings.Cut(s.ContainerID, "://")
		}
	}
	out, err := exec.CommandContext(ctx, "ctr", "--address", containerdSock, "-n", "k8s.io", "tasks", "ls").Output()
	if err != nil || id == "" {
		t.Fatalf("containerd tasks (container %q): %v", id, err)
	}
	var pid int
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
			fmt.Sscan(f[1], &pid)
		}
	}
	ns, err := netns.GetFromPid(pid)
	if err != nil {
		t.Fatalf("namespace of %s (pid %d): %v", pod.Name, pid, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName(link)
	if err != nil {
		t.Fatalf("%s in %s: %v", link, pod.Name, err)
	}
	list, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []net.IPNet
	for _, a := range list {
		addrs = append(addrs, *a.IPNet)
	}
	return addrs
}

// containsAny says whether one of addrs is in pool.
func containsAny(pool *net.IPNet, addrs []net.IPNet) bool {
	for _, a := range addrs {
		if pool.Contains(a.IP) {
			return true
		}
	}
	return false
}
