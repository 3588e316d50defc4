package kube_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/causeway-net/causeway/internal/netnsdo"
)

// TestSecurity performs the attacks of docs/security.md's findings 1, 2
// and 5 on the real API server and SPIRE, against the chart installed as a user does
// (per-node IDs of the proxies by default, NSM's pod IDs for the rest):
// a pod with a proxy's identity acting for another node at the IPAM, a
// stolen proxy token writing EndpointSlices it does not own, a target
// reading the proxy's metrics over the bridge, and a target of another
// namespace claiming a target's pod. docs/security.md says what each
// shows.
func TestSecurity(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	tr := c.startTrench(ctx, t)
	t.Run("ProxyHeldToItsNode", func(t *testing.T) { tr.proxyHeldToItsNode(ctx, t) })
	t.Run("MetricsClosedToTargets", func(t *testing.T) { tr.metricsClosedToTargets(ctx, t) })
	tr.switchServices(ctx, t, everyNamespaceValues)
	t.Run("StolenProxyToken", func(t *testing.T) { tr.stolenProxyToken(ctx, t) })
	t.Run("ForgedPodName", func(t *testing.T) { tr.forgedPodName(ctx, t) })
}

// metricsClosedToTargets: the proxy's metrics, which the NetworkPolicy
// closes on the pod network, are refused over the bridge too: a target
// that dials the bridge's addresses on the metrics port is reset, while
// the proxy's own namespace reads them.
func (tr *trench) metricsClosedToTargets(ctx context.Context, t *testing.T) {
	target := tr.c.stubPods(ctx, t, targetsName, targetReplicas, "target connected")[0]
	proxy := tr.c.proxyOn(ctx, t, target.Spec.NodeName)
	path := tr.c.podNetNS(ctx, t, target, "stub")
	dialed := 0
	for _, a := range tr.c.podAddrs(ctx, t, proxy, proxyContainer, chartBridgeName) {
		if a.IP.IsLinkLocalUnicast() {
			continue
		}
		addr := net.JoinHostPort(a.IP.String(), "9091")
		err := netnsdo.DoPath(path, func() error {
			conn, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", addr)
			if err == nil {
				conn.Close()
			}
			return err
		})
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("target %s dialing the proxy's metrics at %s over the bridge: %v, want the connection refused", target.Name, addr, err)
		}
		dialed++
	}
	if dialed == 0 {
		t.Fatalf("the proxy %s's bridge has no address to dial", proxy.Name)
	}
	if n := tr.c.metric(ctx, t, proxy, proxyContainer, 9091, "go_goroutines", ""); n < 1 {
		t.Fatalf("the proxy's own namespace reads go_goroutines %v from its metrics", n)
	}
	t.Logf("a target's connections to the proxy's metrics at its %d bridge addresses refused; read from the proxy's namespace", dialed)
}

// proxyHeldToItsNode (finding 5): the proxy's SVID names its node and the
// trench serves; a pod with the same identity (the proxies' account and
// labels on the proxy's node: what a compromised proxy holds) allocates
// and releases on its own node, and is refused with PermissionDenied for
// another node's subnet and for another node's bridge child, which keeps
// its address (with several nodes); the IPAM counts the refusals.
func (tr *trench) proxyHeldToItsNode(ctx context.Context, t *testing.T) {
	proxy := tr.c.waitProxyReady(ctx, t)
	own := proxy.Spec.NodeName
	eventually(ctx, t, "the proxy's SVID names its node", func(ctx context.Context) error {
		got := tr.c.svids(ctx, proxy, metav1.Time{})
		if len(got) == 0 || got[len(got)-1].SPIFFEID != proxyNodeID(proxy) {
			return fmt.Errorf("the proxy logged the SVIDs %v, want the last one %s", got, proxyNodeID(proxy))
		}
		return nil
	})
	tr.waitServed(ctx, t)

	other, otherBridge := "no-such-node", []net.IPNet(nil)
	var otherProxy *corev1.Pod
	for _, p := range tr.c.proxyPods(ctx, t) {
		if p.Spec.NodeName != own {
			other, otherProxy = p.Spec.NodeName, p
			otherBridge = tr.c.podAddrs(ctx, t, p, proxyContainer, chartBridgeName)
		}
	}
	ipam := tr.c.ipamPod(ctx, t)
	const refused = `limit="other_node"`
	before := tr.c.metric(ctx, t, ipam, "ipam", 2112, "causeway_ipam_node_refusals_total", refused)

	subnet := func(op, node, child string) string {
		return fmt.Sprintf("%s:%s:%s:%s:%s", op, chartRelease, "load-balancer", node, child)
	}
	calls := []string{
		subnet("allocate", own, "security-probe-src"), subnet("release", own, "security-probe-src"),
		subnet("allocate", other, "security-probe-src"), subnet("release", other, "bridge"),
	}
	args := []string{"-svid", "unix://" + spireSockets + "/agent.sock", "-timeout", "2m",
		"-ipam", fmt.Sprintf("ipam-service-%s.%s.svc:7777", chartRelease, chartNamespace)}
	for _, call := range calls {
		args = append(args, "-call", call)
	}
	out, err := tr.c.runProbe(ctx, t, probePod{
		namespace: chartNamespace, serviceAccount: proxy.Spec.ServiceAccountName, node: own, args: args,
		hostPaths: map[string]string{spireSockets: spireSockets},
		// What the chart's per-node ClusterSPIFFEID selects, without the
		// component label of the proxies' DaemonSet (which would adopt it).
		labels: map[string]string{"app.kubernetes.io/instance": chartRelease, "causeway.io/trench": chartRelease,
			"causeway.io/conduit": "load-balancer"},
	})
	if err != nil {
		t.Fatalf("the probe: %v\n%s", err, out)
	}
	t.Logf("the probe with the proxy's identity:\n%s", out)
	if !strings.Contains(out, "svid "+proxyNodeID(proxy)+"\n") {
		t.Errorf("the probe's SVID is not the proxy's %s", proxyNodeID(proxy))
	}
	for i, want := range []string{"OK 172.16.", "OK", "PermissionDenied", "PermissionDenied"} {
		if !strings.Contains(out, calls[i]+": "+want) {
			t.Errorf("%s: want %s", calls[i], want)
		}
	}
	if after := tr.c.metric(ctx, t, ipam, "ipam", 2112, "causeway_ipam_node_refusals_total", refused); after < before+2 {
		t.Errorf("causeway_ipam_node_refusals_total{%s} went from %v to %v, want 2 more", refused, before, after)
	}
	if otherProxy != nil {
		if now := tr.c.podAddrs(ctx, t, otherProxy, proxyContainer, chartBridgeName); fmt.Sprint(now) != fmt.Sprint(otherBridge) {
			t.Errorf("the bridge of node %s's proxy held %v, now %v", other, otherBridge, now)
		}
	}
}

// stolenProxyToken (finding 2): with a proxy pod's own bound token (what
// one steals from a proxy), the API server refuses what the chart's
// admission policy and RBAC do not grant the proxies: a slice of kube-dns
// without Causeway's labels, a Causeway slice of another node, an update
// and a delete of kube-dns's own slice, reading Secrets; and grants the
// one thing the proxies do: a Causeway slice of the conduit on the token's
// own node.
func (tr *trench) stolenProxyToken(ctx context.Context, t *testing.T) {
	proxy := tr.c.waitProxyReady(ctx, t)
	stolen := tr.c.tokenClient(ctx, t, proxy)
	node := proxy.Spec.NodeName
	causeway := func(node string) map[string]string {
		return map[string]string{discoveryv1.LabelManagedBy: "proxy.causeway-net.github.io", proxyNameLabel: conduitService,
			"causeway-net.github.io/node": node}
	}
	esl := stolen.DiscoveryV1().EndpointSlices
	denied := func(what, msg string, err error) {
		t.Helper()
		if err == nil || !(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: want a refusal saying %q, got %v", what, msg, err)
			return
		}
		t.Logf("%s: refused: %v", what, err)
	}

	dns := forgedSlice("kube-system", "kube-dns-intercept", "kube-dns", map[string]string{discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"})
	_, err := esl("kube-system").Create(ctx, dns, metav1.CreateOptions{})
	denied("a slice of kube-dns", "may write only Causeway's EndpointSlices", err)

	elsewhere := forgedSlice(chartNamespace, "security-other-node", "security-probe", causeway(node+"-other"))
	_, err = esl(chartNamespace).Create(ctx, elsewhere, metav1.CreateOptions{})
	denied("a Causeway slice of another node", "may write only the EndpointSlices of its own node", err)

	owned, err := tr.c.client.DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kube-dns"})
	if err != nil || len(owned.Items) == 0 {
		t.Fatalf("kube-dns's slices: %v (%d)", err, len(owned.Items))
	}
	victim := owned.Items[0].DeepCopy()
	victim.Endpoints = append(victim.Endpoints, forgedSlice("", "", "", nil).Endpoints...)
	_, err = esl("kube-system").Update(ctx, victim, metav1.UpdateOptions{})
	denied("an endpoint added to kube-dns's slice", "may write only Causeway's EndpointSlices", err)
	err = esl("kube-system").Delete(ctx, victim.Name, metav1.DeleteOptions{})
	denied("kube-dns's slice deleted", "may write only Causeway's EndpointSlices", err)

	if _, err := stolen.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the proxies' token lists Secrets: %v", err)
	}

	mine := forgedSlice(chartNamespace, "security-own-node", "security-probe", causeway(node))
	if _, err := esl(chartNamespace).Create(ctx, mine, metav1.CreateOptions{}); err != nil {
		t.Errorf("a Causeway slice of the token's own node: %v", err)
	}
	if err := tr.c.client.DiscoveryV1().EndpointSlices(chartNamespace).Delete(ctx, mine.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete %s: %v", mine.Name, err)
	}
}

// forgedSlice is an EndpointSlice of the Service svc with labels, whose one
// endpoint is an attacker's address.
func forgedSlice(ns, name, svc string, labels map[string]string) *discoveryv1.EndpointSlice {
	port, proto, ready := int32(53), corev1.ProtocolUDP, true
	l := map[string]string{discoveryv1.LabelServiceName: svc}
	maps.Copy(l, labels)
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: l},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.99.99"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Port: &port, Protocol: &proto}},
	}
}

// tokenClient is a client of the API server with a token of pod's
// service account bound to pod (its node in the token), as the kubelet
// mounts in it.
func (c *cluster) tokenClient(ctx context.Context, t *testing.T, pod *corev1.Pod) *kubernetes.Clientset {
	t.Helper()
	expiry := int64(600)
	tok, err := c.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry, BoundObjectRef: &authenticationv1.BoundObjectReference{
			Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of %s bound to %s: %v", pod.Spec.ServiceAccountName, pod.Name, err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tok.Status.Token
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(httpClient.CloseIdleConnections)
	client, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// everyNamespaceValues are kubeServicesValues with the conduit admitting
// the targets of every namespace (the patterns docs/security.md gives), so
// that a target of another namespace connects; kubeServicesValues list
// none: the chart's default, the targets of its own namespace only.
const everyNamespaceValues = kubeServicesValues + `    targetIDs: ["/ns/*/pod/*", "/ns/*/sa/*"]
`

// impostorNamespace holds the target that claims another's pod.
const impostorNamespace = "security-team-b"

// forgedPodName (finding 1): with the conduit admitting every namespace
// (everyNamespaceValues), a target stub of another namespace whose
// connection claims a target pod of the chart's namespace (POD_NAME, which
// NSM's client puts on the connection as its pod) is
// connected but not published: a Service selecting the targets lists
// exactly their addresses, the proxy logs the refusal naming both and
// counts it. Then the conduit lists no targetIDs, and the chart's default
// admits only its own namespace: the impostor, started again, is refused
// (the proxy's PermissionDenied, logged and counted) and never connects.
func (tr *trench) forgedPodName(ctx context.Context, t *testing.T) {
	victimPod := tr.c.stubPods(ctx, t, targetsName, 3, "target connected")[0]
	victim := victimPod.Name
	svc := kubeService{"forged-kube", []string{"10.96.200.12", "fd10:96::c80c"}, false}
	svcs := tr.c.client.CoreV1().Services(chartNamespace)
	if _, err := svcs.Create(ctx, svc.object(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svcs.Delete(context.Background(), svc.name, metav1.DeleteOptions{}) })

	impostor := tr.c.startImpostor(ctx, t, victimPod)
	id := podSPIFFEID(impostorNamespace, impostor.Name)
	proxy := tr.c.proxyOn(ctx, t, victimPod.Spec.NodeName)
	eventually(ctx, t, "the proxy logs the impostor not published", func(ctx context.Context) error {
		for _, line := range strings.Split(tr.c.logs(ctx, proxy), "\n") {
			if strings.Contains(line, "target not published") && strings.Contains(line, id) && strings.Contains(line, victim) {
				t.Logf("the proxy: %s", line)
				return nil
			}
		}
		return fmt.Errorf("no line of %s claiming %s", id, victim)
	})
	tr.checkSlices(ctx, t, svc.name)
	imp := tr.c.podAddrs(ctx, t, impostor, "stub", targetLink)
	published, _, err := tr.publishedAddrs(ctx, svc.name)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range imp {
		ip, ok := netip.AddrFromSlice(a.IP)
		for node, addrs := range published {
			if ok && slices.Contains(addrs, ip.Unmap()) {
				t.Errorf("the impostor's address %s is published in %s's slices of node %s", ip, svc.name, node)
			}
		}
	}
	if n := tr.c.metric(ctx, t, proxy, proxyContainer, 9091, "causeway_proxy_service_targets_unpublished_total", `limit="identity"`); n < 1 {
		t.Errorf("causeway_proxy_service_targets_unpublished_total{limit=\"identity\"} is %v", n)
	}

	tr.switchServices(ctx, t, kubeServicesValues)
	proxy = tr.c.proxyOn(ctx, t, victimPod.Spec.NodeName)
	tr.c.restartImpostor(ctx, t, impostor)
	eventually(ctx, t, "the impostor refused by the conduit's target IDs", func(ctx context.Context) error {
		if n := tr.c.metric(ctx, t, proxy, proxyContainer, 9091, "causeway_proxy_target_identity_refusals_total", `limit="not_allowed"`); n < 1 {
			return fmt.Errorf("no refusal counted (%v)", n)
		}
		for _, line := range strings.Split(tr.c.logs(ctx, proxy), "\n") {
			if strings.Contains(line, "target connection refused for its client's identity") && strings.Contains(line, podSPIFFEID(impostorNamespace, "")) {
				t.Logf("the proxy: %s", line)
				return nil
			}
		}
		return fmt.Errorf("the refusal is not logged")
	})
	time.Sleep(10 * time.Second) // its retries meanwhile refused as well
	for _, p := range tr.c.impostors(ctx, t) {
		if out := tr.c.logs(ctx, p); p.Name != impostor.Name && strings.Contains(out, "target connected") {
			t.Errorf("the impostor %s connected: %s", p.Name, lastLines(out, 5))
		} else {
			t.Logf("the impostor %s: %s", p.Name, lastLines(out, 2))
		}
	}
	tr.checkSlices(ctx, t, svc.name)
}

// startImpostor starts, in impostorNamespace on victimPod's node, one
// target stub that claims that pod (POD_NAME, which NSM's client puts on the connection as
// its pod; its own name, which keys its connection, is its own: under the
// victim's key the proxy would refuse it outright, TestConnectionNotTakenOver
// in pkg/proxy), and returns its pod once connected. The namespace goes
// when t ends.
func (c *cluster) startImpostor(ctx context.Context, t *testing.T, victimPod *corev1.Pod) *corev1.Pod {
	t.Helper()
	victim := victimPod.Name
	nss := c.client.CoreV1().Namespaces()
	if _, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: impostorNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = nss.Delete(context.Background(), impostorNamespace, metav1.DeleteOptions{})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		eventually(ctx, t, "the namespace "+impostorNamespace+" gone", func(ctx context.Context) error {
			if _, err := nss.Get(ctx, impostorNamespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
	})
	c.serviceAccount(ctx, t, impostorNamespace, targetAccount)
	args := stubArgs("target", "-service", proxyService, "-port", fmt.Sprint(echoPort), "-service-port", fmt.Sprint(servicePort))
	args[slices.Index(args, "-name")+1] = "impostor"
	d := stubDeployment("impostor", targetAccount, "localhost/causeway/lab:"+os.Getenv("CAUSEWAY_IMAGE_TAG"), 1, args)
	d.Spec.Template.Spec.NodeName = victimPod.Spec.NodeName // the victim's proxy
	env := d.Spec.Template.Spec.Containers[0].Env
	env[slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == "POD_NAME" })] = corev1.EnvVar{Name: "POD_NAME", Value: victim}
	if _, err := c.client.AppsV1().Deployments(impostorNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	eventually(ctx, t, "the impostor connected", func(ctx context.Context) error {
		for _, p := range c.impostors(ctx, t) {
			if strings.Contains(c.logs(ctx, p), "target connected") {
				pod = p
				return nil
			}
		}
		return fmt.Errorf("not yet")
	})
	return pod
}

// impostors are the impostor's running pods.
func (c *cluster) impostors(ctx context.Context, t *testing.T) []*corev1.Pod {
	return c.runningPods(ctx, t, impostorNamespace, "app=impostor")
}

// runningPods are the running pods of namespace ns that selector selects.
func (c *cluster) runningPods(ctx context.Context, t *testing.T, ns, selector string) []*corev1.Pod {
	t.Helper()
	list, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []*corev1.Pod
	for i := range list.Items {
		if p := &list.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out
}

// restartImpostor replaces the impostor's pod and waits for the new one to
// run.
func (c *cluster) restartImpostor(ctx context.Context, t *testing.T, old *corev1.Pod) {
	t.Helper()
	if err := c.client.CoreV1().Pods(impostorNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "a new impostor pod running", func(ctx context.Context) error {
		for _, p := range c.impostors(ctx, t) {
			if p.Name != old.Name {
				return nil
			}
		}
		return fmt.Errorf("not yet")
	})
}

// proxyOn is the Ready proxy pod of node (once every node has one, and
// only one: proxyPods).
func (c *cluster) proxyOn(ctx context.Context, t *testing.T, node string) *corev1.Pod {
	t.Helper()
	for _, p := range c.proxyPods(ctx, t) {
		if p.Spec.NodeName == node {
			return p
		}
	}
	t.Fatalf("no Ready proxy pod on node %s", node)
	return nil
}

// ipamPod is the chart's IPAM pod.
func (c *cluster) ipamPod(ctx context.Context, t *testing.T) *corev1.Pod {
	t.Helper()
	p, err := c.client.CoreV1().Pods(chartNamespace).Get(ctx, "ipam-"+chartRelease+"-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// metric returns the sum of the samples of the metric name whose labels
// hold match, scraped on port from inside the network namespace of pod's
// container (the NetworkPolicies close the metrics to other pods).
func (c *cluster) metric(ctx context.Context, t *testing.T, pod *corev1.Pod, container string, port int, name, match string) float64 {
	t.Helper()
	var body []byte
	err := netnsdo.DoPath(c.podNetNS(ctx, t, pod, container), func() error {
		conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n"); err != nil {
			return err
		}
		body, err = io.ReadAll(conn)
		return err
	})
	if err != nil {
		t.Fatalf("the metrics of %s: %v", pod.Name, err)
	}
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') || !strings.Contains(line, match) {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}
