package kube_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cluster's tools and containerd (scripts/cluster).
const (
	helmPath        = "/var/lib/causeway-cluster/bin/helm"
	kubectlPath     = "/var/lib/causeway-cluster/bin/kubectl"
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

// helmUpgradeValues upgrades the release with its values reused and
// values (YAML) over them.
func helmUpgradeValues(t *testing.T, values string) {
	t.Helper()
	helmUpgradeRelease(t, chartRelease, chartNamespace, values)
}

// helmUpgradeRelease is helmUpgradeValues of the release of namespace ns.
func helmUpgradeRelease(t *testing.T, release, ns, values string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	helm(t, "upgrade", release, repoPath("deployments/helm/causeway"), "--namespace", ns,
		"--reuse-values", "--values", file)
}

// servicesValues turn the proxies' service load balancer on, with the
// default provider, for the example's conduit (its list repeated: Helm
// replaces lists): two services, one per family, TCP and UDP on port 80,
// whose endpoints are the targets connected to the proxy, on servicePort.
const servicesValues = `
services:
  enabled: true
  source: file
  prefixes: []
conduits:
  - name: load-balancer
    destinationPortNats:
      - {port: 80, targetPort: 8080, protocol: tcp, vips: [vip-v4]}
    servicesFile:
      prefixes: [10.111.0.0/24, "fd96::/112"]
      services:
        - namespace: red
          name: echo
          ip: 10.111.0.10
          ports:
            - {name: tcp, port: 80, protocol: TCP, targetPort: 8080}
            - {name: udp, port: 80, protocol: UDP, targetPort: 8080}
        - namespace: red
          name: echo6
          ip: "fd96::10"
          ports:
            - {name: tcp, port: 80, protocol: TCP, targetPort: 8080}
            - {name: udp, port: 80, protocol: UDP, targetPort: 8080}
`

// The services of servicesValues and their targets' port.
var chartServices = []netip.AddrPort{netip.MustParseAddrPort("10.111.0.10:80"), netip.MustParseAddrPort("[fd96::10]:80")}

const servicePort = 8080

// installChart installs the chart as a user does: the example values (with
// the proxies' services on, servicesValues), the
// images of this clone (loaded by make test-kube with CAUSEWAY_IMAGE_TAG)
// and the cluster's own sysctl image; nothing for SPIRE (the chart's
// defaults fit NSM's: its pods get their IDs from NSM's ClusterSPIFFEID,
// nobody registers them). It uninstalls it when t ends. Image references go
// in with --set-string: a tag of digits only (a git hash such as 6776663)
// would otherwise be a number, which the chart's schema refuses.
func (c *cluster) installChart(ctx context.Context, t *testing.T) {
	t.Helper()
	tag := os.Getenv("CAUSEWAY_IMAGE_TAG")
	if tag == "" {
		t.Fatal("CAUSEWAY_IMAGE_TAG names the images to install (make test-kube sets it)")
	}
	c.recycleVolumes(t)
	busybox := c.image(ctx, t, "busybox")
	repo, btag, _ := strings.Cut(busybox, ":")
	set := []string{
		"images.sysctlInit.repository=" + repo, "images.sysctlInit.tag=" + btag,
	}
	for _, b := range []string{"proxy", "ipam", "nsp"} {
		set = append(set, "images."+b+".repository=localhost/causeway/"+b, "images."+b+".tag="+tag)
	}
	services := filepath.Join(t.TempDir(), "services.yaml")
	if err := os.WriteFile(services, []byte(servicesValues), 0o644); err != nil {
		t.Fatal(err)
	}
	helm(t, "install", chartRelease, repoPath("deployments/helm/causeway"), "--namespace", chartNamespace,
		"--create-namespace", "--values", repoPath(chartExample), "--values", services, "--set-string", strings.Join(set, ","))
	t.Cleanup(func() {
		// A test that failed before its own uninstall leaves nothing either.
		_ = exec.Command(helmPath, "uninstall", chartRelease, "--namespace", chartNamespace, "--wait", "--ignore-not-found",
			"--kubeconfig", kubeconfigPath()).Run()
		c.waitClaimGone(t, chartNamespace, "ipam-data-ipam-"+chartRelease+"-0")
		c.recycleVolumes(t)
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

// podNetNS returns the path of the network namespace of pod's container
// (its process found through the cluster's containerd).
func (c *cluster) podNetNS(ctx context.Context, t *testing.T, pod *corev1.Pod, container string) string {
	t.Helper()
	var id string
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == container {
			_, id, _ = strings.Cut(s.ContainerID, "://")
		}
	}
	out, err := exec.CommandContext(ctx, "ctr", "--address", containerdSock(pod.Spec.NodeName), "-n", "k8s.io", "tasks", "ls").Output()
	if err != nil || id == "" {
		t.Fatalf("containerd tasks (container %q of %s): %v", id, pod.Name, err)
	}
	var pid int
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
			fmt.Sscan(f[1], &pid)
		}
	}
	if pid == 0 {
		t.Fatalf("no task of container %s of %s", id, pod.Name)
	}
	return fmt.Sprintf("/proc/%d/ns/net", pid)
}

// podAddrs returns the addresses of link in the network namespace of pod's
// container.
func (c *cluster) podAddrs(ctx context.Context, t *testing.T, pod *corev1.Pod, container, link string) []net.IPNet {
	t.Helper()
	var list []netlink.Addr
	withHandle(t, c.podNetNS(ctx, t, pod, container), func(h *netlink.Handle) {
		l, err := h.LinkByName(link)
		if err != nil {
			t.Fatalf("%s in %s: %v", link, pod.Name, err)
		}
		if list, err = h.AddrList(l, netlink.FAMILY_ALL); err != nil {
			t.Fatal(err)
		}
	})
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
