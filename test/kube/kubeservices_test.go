package kube_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// kubeServicesValues switch the proxies' services to the Kubernetes source
// (the example's conduit repeated without its servicesFile): they serve
// the Services labelled with the conduit's proxy name, whose cluster IPs
// the suite fixes in two narrow prefixes of the cluster's service CIDRs
// (scripts/cluster/lib.sh), which the targets route to their proxy.
const kubeServicesValues = `
services:
  enabled: true
  source: kubernetes
  prefixes: [10.96.200.0/24, "fd10:96::c800/120"]
conduits:
  - name: load-balancer
    destinationPortNats:
      - {port: 80, targetPort: 8080, protocol: tcp, vips: [vip-v4]}
`

// The Services of the scenario: echo (no affinity) and sticky (ClientIP),
// dual-stack, selecting the target stubs; plain, the same without the
// proxy's label, which kube-proxy takes.
var (
	kubeEcho   = kubeService{"echo-kube", []string{"10.96.200.10", "fd10:96::c80a"}, false}
	kubeSticky = kubeService{"sticky-kube", []string{"10.96.200.11", "fd10:96::c80b"}, true}
	kubePlain  = kubeService{"plain", []string{"10.96.200.20"}, false}
)

const (
	proxyNameLabel   = "service.kubernetes.io/service-proxy-name"
	sliceManagedBy   = "endpointslice.kubernetes.io/managed-by=proxy.causeway-net.github.io"
	proxySelector    = "app.kubernetes.io/component=proxy-load-balancer"
	sliceNodeLabel   = "causeway-net.github.io/node"
	proxyNftTable    = "causeway-svc" // pkg/servicelb/nftlb.TableName
	kubeServicesPort = 80
	// The chart's ClusterRole of the proxies' Kubernetes source.
	servicesClusterRole = chartNamespace + "-proxy-" + chartRelease + "-services"
)

type kubeService struct {
	name     string
	ips      []string
	affinity bool
}

// object is the Service: labelled for the conduit's proxies unless it is
// plain, TCP and UDP on kubeServicesPort to the targets' servicePort.
func (s kubeService) object() *corev1.Service {
	policy := corev1.IPFamilyPolicyPreferDualStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: chartNamespace},
		Spec: corev1.ServiceSpec{
			Selector:       map[string]string{"app": targetsName},
			ClusterIP:      s.ips[0],
			ClusterIPs:     s.ips,
			IPFamilyPolicy: &policy,
			Ports: []corev1.ServicePort{
				{Name: "tcp", Port: kubeServicesPort, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(servicePort)},
				{Name: "udp", Port: kubeServicesPort, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(servicePort)},
			},
		},
	}
	if s.name != kubePlain.name {
		svc.Labels = map[string]string{proxyNameLabel: conduitService}
	}
	if s.affinity {
		svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	}
	return svc
}

// addrs are the Service's cluster IPs on port.
func (s kubeService) addrs(port int) []netip.AddrPort {
	var out []netip.AddrPort
	for _, ip := range s.ips {
		out = append(out, netip.AddrPortFrom(netip.MustParseAddr(ip), uint16(port)))
	}
	return out
}

// kubeServices: the proxies switched to the Kubernetes source (helm
// upgrade; switched back to the file when the scenario ends), a Service
// labelled for the conduit is served to a target pod on its cluster IPs,
// and not by kube-proxy; each proxy publishes its node's targets' conduit
// addresses in its EndpointSlices, which follow a target pod replaced
// while flows go on, and serves them, its node's targets only (a proxy
// has no path to another node's targets); ClientIP affinity holds; a port
// added is served, and a Service deleted takes its rules and slices along.
func (tr *trench) kubeServices(ctx context.Context, t *testing.T) {
	tr.switchServices(ctx, t, kubeServicesValues)
	t.Cleanup(func() { tr.switchServices(ctx, t, servicesValues) })
	svcs := tr.c.client.CoreV1().Services(chartNamespace)
	t.Cleanup(func() {
		for _, s := range []kubeService{kubeEcho, kubeSticky, kubePlain} {
			_ = svcs.Delete(context.Background(), s.name, metav1.DeleteOptions{})
		}
	})
	pods := tr.c.stubPods(ctx, t, targetsName, targetReplicas, "target connected")
	client := tr.c.podNetNS(ctx, t, pods[0], "stub")

	start := time.Now()
	if _, err := svcs.Create(ctx, kubeEcho.object(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := kubeEcho.addrs(kubeServicesPort)[0]
	for {
		// Finer than eventually's period, the figure being a fraction of
		// it; a SYN sent before the rules is dropped, hence short tries.
		if _, err := traffic.Ask(ctx, client, "tcp", netip.Addr{}, first, 100*time.Millisecond); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("no flow to %s served: %v", first, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("FIGURE: kubernetes source: Service created to its first flow served from a target pod: %.2f s", time.Since(start).Seconds())

	tr.checkKubeProxySkips(ctx, t)
	tr.checkSlices(ctx, t, kubeEcho.name)
	for _, svc := range kubeEcho.addrs(kubeServicesPort) {
		for _, network := range []string{"tcp", "udp"} {
			tr.servedOnEveryNode(ctx, t, pods, network, svc)
		}
	}
	tr.checkNoWarnings(ctx, t, kubeEcho.name)
	tr.checkAffinity(ctx, t, pods)
	tr.churnTargets(ctx, t, client, pods[0])
	tr.slicesGoWithTheirPods(ctx, t, kubeEcho.name)
	tr.changeService(ctx, t)
}

// checkNoWarnings: the proxy reported nothing it refuses of the Service
// (a Warning Event on it: a cluster IP outside the prefixes, a port not
// served).
func (tr *trench) checkNoWarnings(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	events, err := tr.c.client.CoreV1().Events(chartNamespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Service,involvedObject.name=" + name + ",type=Warning",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		t.Errorf("Warning on the Service %s: %s: %s", name, e.Reason, e.Message)
	}
}

// switchServices upgrades the release with the values in values (the
// others reused) and waits until the proxy's pod has been replaced (by the
// chart's upgrade hook: the source's environment and volume cannot change
// in place), is Ready, and every target answers on the VIPs again.
func (tr *trench) switchServices(ctx context.Context, t *testing.T, values string) {
	t.Helper()
	proxy := tr.c.waitProxyReady(ctx, t)
	// Every node's proxy Ready first: the chart's in-place upgrade stops
	// rather than take a second node's proxy away.
	tr.c.waitDaemonSetsRolledOut(ctx, t, chartNamespace)
	start := time.Now()
	helmUpgradeValues(t, values)
	tr.c.waitReplacedOn(ctx, t, proxy, proxySelector)
	tr.c.waitDaemonSetsRolledOut(ctx, t, chartNamespace)
	tr.waitServed(ctx, t)
	t.Logf("services switched (helm upgrade to the proxy replaced and serving): %.1f s", time.Since(start).Seconds())
	// The proxies may read the API only with the Kubernetes source.
	_, err := tr.c.client.RbacV1().ClusterRoles().Get(ctx, servicesClusterRole, metav1.GetOptions{})
	if fromAPI := strings.Contains(values, "source: kubernetes"); fromAPI && err != nil || !fromAPI && !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRole %s with the kubernetes source %v: %v", servicesClusterRole, fromAPI, err)
	}
}

// waitDaemonSetsRolledOut waits until every DaemonSet of namespace ns
// runs its current template Ready on every node it wants (the proxies of
// all nodes, not only the one a scenario watches).
func (c *cluster) waitDaemonSetsRolledOut(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	eventually(ctx, t, "the DaemonSets of "+ns+" rolled out", func(ctx context.Context) error {
		list, err := c.client.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ds := range list.Items {
			st := ds.Status
			if st.ObservedGeneration < ds.Generation || st.UpdatedNumberScheduled != st.DesiredNumberScheduled ||
				st.NumberReady != st.DesiredNumberScheduled || st.NumberUnavailable != 0 {
				return fmt.Errorf("%s: %d of %d updated, %d ready", ds.Name, st.UpdatedNumberScheduled, st.DesiredNumberScheduled, st.NumberReady)
			}
		}
		return nil
	})
}

// checkKubeProxySkips: kube-proxy programs the unlabelled Service (its
// cluster IP in kube-proxy's nftables table, which shows that it has seen
// the Services created before it) and has no rule for the labelled one.
func (tr *trench) checkKubeProxySkips(ctx context.Context, t *testing.T) {
	t.Helper()
	svcs := tr.c.client.CoreV1().Services(chartNamespace)
	if _, err := svcs.Create(ctx, kubePlain.object(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes := clusterNodes(t)
	eventually(ctx, t, "kube-proxy programs the unlabelled Service on every node", func(ctx context.Context) error {
		for _, node := range nodes {
			if !strings.Contains(nftList(t, nodeNetNS(t, node), "ip", "kube-proxy"), kubePlain.ips[0]) {
				return fmt.Errorf("%s not in kube-proxy's table on node %s", kubePlain.ips[0], node)
			}
		}
		return nil
	})
	if err := svcs.Delete(ctx, kubePlain.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, node := range nodes {
		ns := nodeNetNS(t, node)
		tables := nftList(t, ns, "ip", "kube-proxy") + nftList(t, ns, "ip6", "kube-proxy")
		for _, ip := range kubeEcho.ips {
			if strings.Contains(tables, ip) {
				t.Errorf("kube-proxy of node %s has a rule for %s of the labelled Service %s", node, ip, kubeEcho.name)
			}
		}
	}
}

// nftList lists an nftables table in the network namespace at path.
func nftList(t *testing.T, path, family, table string) string {
	t.Helper()
	cmd := exec.Command("nsenter", "--net="+path, "nft", "list", "table", family, table)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nft list table %s %s: %v: %s", family, table, err, out)
	}
	return string(out)
}

// publishedAddrs returns the ready addresses of the proxies' EndpointSlices
// of the Service name, sorted, by the node the slice names, and how many
// slices there are.
func (tr *trench) publishedAddrs(ctx context.Context, name string) (map[string][]netip.Addr, int, error) {
	list, err := tr.c.client.DiscoveryV1().EndpointSlices(chartNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + name + "," + sliceManagedBy,
	})
	if err != nil {
		return nil, 0, err
	}
	out := map[string][]netip.Addr{}
	for _, s := range list.Items {
		node := s.Labels[sliceNodeLabel]
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil {
					out[node] = append(out[node], ip)
				}
			}
		}
		slices.SortFunc(out[node], netip.Addr.Compare)
	}
	return out, len(list.Items), nil
}

// checkSlices waits until the proxies' EndpointSlices of the Service name
// hold, ready, exactly the conduit addresses of the running targets (both
// families), each node's in the two slices of its node's proxy, and logs
// what kubectl shows of them.
func (tr *trench) checkSlices(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	eventually(ctx, t, "the slices of "+name+" hold the targets' addresses", func(ctx context.Context) error {
		pods := tr.c.stubPods(ctx, t, targetsName, targetReplicas, "target connected")
		addrs := tr.addrsOf(ctx, t, pods)
		want := map[string][]netip.Addr{}
		for _, p := range pods {
			want[p.Spec.NodeName] = append(want[p.Spec.NodeName], addrs[p.Name]...)
		}
		for node := range want {
			slices.SortFunc(want[node], netip.Addr.Compare)
		}
		got, n, err := tr.publishedAddrs(ctx, name)
		if err != nil {
			return err
		}
		if !maps.EqualFunc(got, want, slices.Equal) || n != 2*len(want) {
			return fmt.Errorf("%d slices with %v, want %d with %v", n, got, 2*len(want), want)
		}
		return nil
	})
	out, err := exec.CommandContext(ctx, kubectlPath, "--kubeconfig", kubeconfigPath(), "get", "endpointslices",
		"-n", chartNamespace, "-l", discoveryv1.LabelServiceName+"="+name).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get endpointslices: %v: %s", err, out)
	}
	t.Logf("kubectl get endpointslices -l %s=%s:\n%s", discoveryv1.LabelServiceName, name, out)
}

// checkAffinity: each of two target pods, its flows to the ClientIP
// Service (TCP and UDP, both families) all answered by one target.
func (tr *trench) checkAffinity(ctx context.Context, t *testing.T, pods []*corev1.Pod) {
	t.Helper()
	if _, err := tr.c.client.CoreV1().Services(chartNamespace).Create(ctx, kubeSticky.object(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods[:2] {
		client := tr.c.podNetNS(ctx, t, p, "stub")
		for _, svc := range kubeSticky.addrs(kubeServicesPort) {
			for _, network := range []string{"tcp", "udp"} {
				var tally traffic.Tally
				eventually(ctx, t, fmt.Sprintf("%s %s from %s served by one target", network, svc, p.Name), func(ctx context.Context) error {
					tally = runFlows(ctx, network, traffic.Flows{NetNSPath: client, Addr: svc, Count: 30, Attempts: 3})
					if tally.Errors != 0 || len(tally.Answers) != 1 {
						return fmt.Errorf("%s", tally)
					}
					return nil
				})
				t.Logf("%s to %s (%s) from %s: %s", network, svc, kubeSticky.name, p.Name, tally)
			}
		}
	}
}

// churnTargets deletes a target pod (not the client's) while the client
// probes the echo Service: the slices follow (its addresses gone, its
// replacement's in), every target answers, and the flows lost meanwhile
// are a figure.
func (tr *trench) churnTargets(ctx context.Context, t *testing.T, client string, clientPod *corev1.Pod) {
	t.Helper()
	before := tr.targetAddrs(ctx, t)
	var victim string
	for name := range before {
		if name != clientPod.Name && (victim == "" || name > victim) {
			victim = name
		}
	}
	stop := startProber(ctx, t, traffic.ProbeConfig{
		NetNSPath: client, Network: "tcp", Addr: kubeEcho.addrs(kubeServicesPort)[0], Interval: 10 * time.Millisecond,
	})
	time.Sleep(time.Second)
	start := time.Now()
	after := tr.deleteTarget(ctx, t, victim)
	tr.checkSlices(ctx, t, kubeEcho.name)
	followed := time.Since(start)
	pods := tr.c.stubPods(ctx, t, targetsName, targetReplicas, "target connected")
	tr.servedOnEveryNode(ctx, t, pods, "tcp", kubeEcho.addrs(kubeServicesPort)[0])
	time.Sleep(time.Second)
	series := stop()
	t.Logf("targets before %v, after %v: the slices hold the latter's addresses", before, after)
	if len(series.After(start)) == 0 || !series[len(series)-1].OK() {
		t.Fatalf("flows to %s not served after the churn: %v", kubeEcho.name, series.LongestGap())
	}
	window := "none"
	if gaps := series.Gaps(); len(gaps) > 0 {
		window = fmt.Sprintf("%.2f–%.2f s after the delete (%v)", gaps[0].Start.Sub(start).Seconds(),
			gaps[len(gaps)-1].End.Sub(start).Seconds(), series.FirstError())
	}
	t.Logf("FIGURE: kubernetes source, a target pod deleted and replaced: slices followed after %.1f s; %d of %d flows lost, %s; answered by %v",
		followed.Seconds(), series.Failures(), len(series), window, series.Targets())
}

// changeService adds a port to the echo Service (served by every target
// on both families), then deletes it: its cluster IPs leave the proxy's
// nftables table and its slices go.
func (tr *trench) changeService(ctx context.Context, t *testing.T) {
	t.Helper()
	svcs := tr.c.client.CoreV1().Services(chartNamespace)
	svc, err := svcs.Get(ctx, kubeEcho.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const added = 81
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "tcp-81", Port: added, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(servicePort)})
	if _, err := svcs.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := tr.c.stubPods(ctx, t, targetsName, targetReplicas, "target connected")
	for _, a := range kubeEcho.addrs(added) {
		tr.servedOnEveryNode(ctx, t, pods, "tcp", a)
	}

	proxyNS := tr.c.podNetNS(ctx, t, tr.c.waitProxyReady(ctx, t), proxyContainer)
	table := nftList(t, proxyNS, "inet", proxyNftTable)
	for _, ip := range kubeEcho.ips {
		if !strings.Contains(table, ip) {
			t.Fatalf("the proxy's table has no %s of %s:\n%s", ip, kubeEcho.name, table)
		}
	}
	if err := svcs.Delete(ctx, kubeEcho.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, kubeEcho.name+" deleted: its rules and slices gone", func(ctx context.Context) error {
		table := nftList(t, proxyNS, "inet", proxyNftTable)
		for _, ip := range kubeEcho.ips {
			if strings.Contains(table, ip) {
				return fmt.Errorf("%s still in the proxy's table", ip)
			}
		}
		if !strings.Contains(table, kubeSticky.ips[0]) {
			return fmt.Errorf("%s of %s gone too", kubeSticky.ips[0], kubeSticky.name)
		}
		if _, n, err := tr.publishedAddrs(ctx, kubeEcho.name); err != nil || n != 0 {
			return fmt.Errorf("%d slices left (%v)", n, err)
		}
		return nil
	})
	if _, err := svcs.Get(ctx, kubeEcho.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s still there: %v", kubeEcho.name, err)
	}
}

// slicesGoWithTheirPods: a node's EndpointSlices are owned by the target
// pods they list, so they go when those pods go even with no proxy to
// withdraw them (a node deleted from the cluster, whose pods the cluster
// deletes). The node's proxy is stopped (SIGSTOP, within its liveness
// probe's patience) and every target pod of its node force-deleted: the
// cluster's garbage collector deletes the node's slices of the Service
// name. The proxy continued, the replacements connect and the slices hold
// them again.
func (tr *trench) slicesGoWithTheirPods(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	proxy := tr.c.waitProxyReady(ctx, t)
	node := proxy.Spec.NodeName
	if got, _, err := tr.publishedAddrs(ctx, name); err != nil || len(got[node]) == 0 {
		t.Fatalf("the slices of %s on %s before: %v %v", name, node, got, err)
	}
	pid := strings.TrimSuffix(strings.TrimPrefix(tr.c.podNetNS(ctx, t, proxy, proxyContainer), "/proc/"), "/ns/net")
	signal := func(sig string) {
		if out, err := exec.Command("kill", "-"+sig, pid).CombinedOutput(); err != nil {
			t.Errorf("kill -%s %s (the proxy): %v: %s", sig, pid, err, out)
		}
	}
	signal("STOP")
	continued := false
	cont := func() {
		if !continued {
			continued = true
			signal("CONT")
		}
	}
	t.Cleanup(cont)
	start := time.Now()
	zero := int64(0)
	for _, p := range tr.c.runningPods(ctx, t, chartNamespace, "app="+targetsName) {
		if p.Spec.NodeName == node {
			if err := tr.c.client.CoreV1().Pods(chartNamespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Within the proxy's liveness probe's patience (5 × 10 s).
	gctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	eventually(gctx, t, "the slices of "+name+" on "+node+" gone with their pods", func(ctx context.Context) error {
		got, _, err := tr.publishedAddrs(ctx, name)
		if err != nil {
			return err
		}
		if len(got[node]) > 0 {
			return fmt.Errorf("still %v", got[node])
		}
		return nil
	})
	gone := time.Since(start)
	cont()
	tr.checkSlices(ctx, t, name)
	t.Logf("FIGURE: kubernetes source, the proxy of %s stopped and its node's target pods deleted: their slices deleted by the garbage collector after %.1f s; published again %.1f s after the deletion",
		node, gone.Seconds(), time.Since(start).Seconds())
}
