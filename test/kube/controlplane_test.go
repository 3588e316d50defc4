package kube_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The ports of the IPAM's and the configuration server's Services, which
// the proxy dials.
const (
	ipamPort = 7777
	nspPort  = 7778
)

// endpointsOf returns the names of the registry's endpoint resources that
// serve service.
func (c *cluster) endpointsOf(ctx context.Context, service string) ([]string, error) {
	list, err := c.dynamic.Resource(nseResource).Namespace(nsmNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, nse := range list.Items {
		services, _, _ := unstructured.NestedStringSlice(nse.Object, "spec", "network_service_names")
		if slices.Contains(services, service) {
			names = append(names, nse.GetName())
		}
	}
	slices.Sort(names)
	return names, nil
}

// replaceRegistry deletes NSM's registry-k8s pod while the external host
// probes the VIP: the registrations stay in the registry's resources (the
// proxy's and the LBs' endpoints are the same objects after it), no probe
// is lost, and a target replaced once the new registry is Ready finds the
// proxy's endpoint again through it (how long that takes is a figure).
func (tr *trench) replaceRegistry(ctx context.Context, t *testing.T) {
	tr.c.waitProxyReady(ctx, t)
	proxyNSEs, err := tr.c.endpointsOf(ctx, proxyService)
	if err != nil || len(proxyNSEs) == 0 {
		t.Fatalf("the proxy's endpoint resources: %v %v", proxyNSEs, err)
	}
	lbNSEs, err := tr.c.endpointsOf(ctx, conduitService)
	if err != nil || len(lbNSEs) != 2 {
		t.Fatalf("the LBs' endpoint resources: %v %v", lbNSEs, err)
	}
	stop := tr.proberOn(ctx, t)
	time.Sleep(time.Second)
	start := time.Now()
	list, err := tr.c.client.CoreV1().Pods(nsmNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=registry"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("registry pods: %v, %d", err, len(list.Items))
	}
	tr.c.deletePod(ctx, t, &list.Items[0], "app=registry")
	ready := time.Since(start)
	for service, want := range map[string][]string{proxyService: proxyNSEs, conduitService: lbNSEs} {
		if got, err := tr.c.endpointsOf(ctx, service); err != nil || !slices.Equal(got, want) {
			t.Errorf("endpoints of %s after the registry's replacement: %v %v, want %v", service, got, err, want)
		}
	}
	time.Sleep(3 * time.Second) // what follows the registry's return
	series := stop()
	// A new target's request goes through the nsmgr to the new registry,
	// which must find the proxy's endpoint in its resources. (After the
	// probes: a target replaced loses the probes the LB stubs still send
	// to it, which TargetReplaced measures; the loss here is the
	// registry's.)
	before := tr.targetAddrs(ctx, t)
	victim := tr.targetNames(ctx, t)[0]
	found := time.Now()
	after := tr.deleteTarget(ctx, t, victim)
	foundIn := time.Since(found)
	checkUnique(t, after)
	checkKept(t, before, after)
	tr.waitServed(ctx, t)
	t.Logf("FIGURE: registry-k8s pod replaced: new pod Ready after %.1f s; a new target served %.1f s after its predecessor's delete; %d of %d probes lost (longest gap %s)",
		ready.Seconds(), foundIn.Seconds(), series.Failures(), len(series), series.LongestGap().Len().Round(time.Millisecond))
	if !noOutage(t, series, "the registry was replaced", start) {
		tr.logPods(ctx, t, nsmNamespace, "app in (registry,nsmgr)")
	}
}

// replaceSPIRE deletes the SPIRE server's pod, then, once it is back, the
// node's agent's, while the external host probes the VIP: the proxy keeps
// every connection it has to the IPAM and to the configuration server (the
// same sockets before and after: its SVID and the peers' stay valid, and a
// new one comes from the new agent), no probe is lost, and the proxy stays
// Ready.
func (tr *trench) replaceSPIRE(ctx context.Context, t *testing.T) {
	proxy := tr.c.waitProxyReady(ctx, t)
	conns := tr.c.proxyConns(ctx, t, proxy)
	if len(conns) == 0 {
		t.Fatalf("the proxy has no connection to the IPAM (:%d) or the nsp (:%d)", ipamPort, nspPort)
	}
	stop := tr.proberOn(ctx, t)
	time.Sleep(time.Second)
	start := time.Now()
	var figures []string
	for _, app := range []string{"spire-server", "spire-agent"} {
		opts := metav1.ListOptions{LabelSelector: "app=" + app}
		if app == "spire-agent" { // the agent of the proxy's node
			opts.FieldSelector = "spec.nodeName=" + proxy.Spec.NodeName
		}
		list, err := tr.c.client.CoreV1().Pods("spire").List(ctx, opts)
		if err != nil || len(list.Items) != 1 {
			t.Fatalf("%s pods: %v, %d", app, err, len(list.Items))
		}
		deleted := time.Now()
		tr.c.deletePod(ctx, t, &list.Items[0], "app="+app)
		figures = append(figures, fmt.Sprintf("%s Ready after %.1f s", app, time.Since(deleted).Seconds()))
	}
	time.Sleep(3 * time.Second) // what follows the agent's return
	series := stop()
	// The workloads fetch from the new agent: an SVID for a new pod comes
	// from it (a target replaced, after the probes as in replaceRegistry),
	// and the proxy's connections stay.
	after := tr.deleteTarget(ctx, t, tr.targetNames(ctx, t)[0])
	checkUnique(t, after)
	tr.waitServed(ctx, t)
	now := tr.c.proxyConns(ctx, t, tr.c.waitProxyReady(ctx, t))
	t.Logf("FIGURE: spire-server then spire-agent pods replaced: %s; %d of %d probes lost (longest gap %s); the proxy's %d connections to the IPAM and nsp kept: %v",
		strings.Join(figures, ", "), series.Failures(), len(series), series.LongestGap().Len().Round(time.Millisecond), len(conns), slices.Equal(conns, now))
	if !slices.Equal(conns, now) {
		t.Errorf("the proxy's connections to the IPAM and nsp were %v, now %v", conns, now)
	}
	noOutage(t, series, "SPIRE's pods were replaced", start)
	if p := tr.c.waitProxyReady(ctx, t); p.Name != proxy.Name || restarts(p) != restarts(proxy) {
		t.Errorf("the proxy's pod %s (%d restarts) is now %s (%d restarts)", proxy.Name, restarts(proxy), p.Name, restarts(p))
	}
}

// proxyConns returns the proxy's established TCP connections to the IPAM's
// and the configuration server's ports (local and remote address, as the
// kernel of its network namespace lists them), sorted.
func (c *cluster) proxyConns(ctx context.Context, t *testing.T, proxy *corev1.Pod) []string {
	t.Helper()
	netns := c.podNetNS(ctx, t, proxy, proxyContainer)
	pid := strings.TrimSuffix(strings.TrimPrefix(netns, "/proc/"), "/ns/net")
	var conns []string
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open("/proc/" + pid + "/net/" + table)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st ...: addresses in hex, port after ':'
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "01" { // ESTABLISHED
				continue
			}
			_, port, _ := strings.Cut(fields[2], ":")
			if port == fmt.Sprintf("%04X", ipamPort) || port == fmt.Sprintf("%04X", nspPort) {
				conns = append(conns, fields[1]+"->"+fields[2])
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(conns)
	return conns
}

// restarts is how often pod's containers restarted.
func restarts(pod *corev1.Pod) int32 {
	var n int32
	for _, s := range pod.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// clusterSPIFFEIDs are spire-controller-manager's ClusterSPIFFEID objects.
var clusterSPIFFEIDs = schema.GroupVersionResource{Group: "spire.spiffe.io", Version: "v1alpha1", Resource: "clusterspiffeids"}

// rotateSVIDs shortens the X.509 SVID TTL of NSM's ClusterSPIFFEID to a
// minute while the external host probes the VIP: SPIRE mints every
// workload a new SVID at once (the entry changed) and again about every
// half minute. The proxy logs each one, keeps its connections to the IPAM
// and the nsp, and no probe is lost; then the IPAM replaced makes the
// proxy handshake again, with an SVID that is a rotation, not its first,
// and a new target is served through it.
func (tr *trench) rotateSVIDs(ctx context.Context, t *testing.T) {
	const ttl = time.Minute
	proxy := tr.c.waitProxyReady(ctx, t)
	conns := tr.c.proxyConns(ctx, t, proxy)
	ids := tr.c.dynamic.Resource(clusterSPIFFEIDs)
	// NSM's names the IPAM, the nsp and the stubs; the chart's own names
	// the proxies (spire.nodeIDs).
	patch := func(ttl string) error {
		var errs []error
		for _, name := range []string{"nsm-workloads", proxyNodeIDs} {
			_, err := ids.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"ttl":`+ttl+`}}`), metav1.PatchOptions{})
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	stop := tr.proberOn(ctx, t)
	time.Sleep(time.Second)
	start := metav1.Now()
	if err := patch(`"` + ttl.String() + `"`); err != nil {
		t.Fatalf("nsm-workloads' ttl: %v", err)
	}
	t.Cleanup(func() {
		if err := patch("null"); err != nil {
			t.Errorf("nsm-workloads' ttl back to SPIRE's default: %v", err)
		}
	})
	var renewals []svidLog
	eventually(ctx, t, "two short-lived SVIDs in the proxy's log", func(ctx context.Context) error {
		renewals = tr.c.svidRenewals(ctx, proxy, start, 2*ttl)
		if len(renewals) < 2 {
			return fmt.Errorf("%d so far", len(renewals))
		}
		return nil
	})
	series := stop()
	t.Logf("FIGURE: X.509 SVIDs of a %s TTL: the proxy's first two renewals %.1f s and %.1f s after the change; %d of %d probes lost (longest gap %s)",
		ttl, renewals[0].Time.Sub(start.Time).Seconds(), renewals[1].Time.Sub(start.Time).Seconds(),
		series.Failures(), len(series), series.LongestGap().Len().Round(time.Millisecond))
	noOutage(t, series, "SVIDs rotated", start.Time)
	if now := tr.c.proxyConns(ctx, t, proxy); !slices.Equal(conns, now) {
		t.Errorf("the proxy's connections to the IPAM and nsp were %v, now %v", conns, now)
	}
	tr.replaceIPAM(ctx, t)
	if p := tr.c.waitProxyReady(ctx, t); p.Name != proxy.Name || restarts(p) != restarts(proxy) {
		t.Errorf("the proxy's pod %s (%d restarts) is now %s (%d restarts)", proxy.Name, restarts(proxy), p.Name, restarts(p))
	}
}

// svidLog is a line of a component's log about a new SVID (internal/svidlog).
type svidLog struct {
	Time     time.Time `json:"time"`
	Msg      string    `json:"msg"`
	SPIFFEID string    `json:"spiffe_id"`
	NotAfter time.Time `json:"not_after"`
}

// svids returns the lines about SVIDs the proxy logged since since (all
// with a zero since), the first SVID's and the renewals'.
func (c *cluster) svids(ctx context.Context, proxy *corev1.Pod, since metav1.Time) []svidLog {
	var out []svidLog
	for _, l := range jsonLogs[svidLog](ctx, c, proxy, proxyContainer, since) {
		if strings.HasPrefix(l.Msg, "SPIFFE SVID") {
			out = append(out, l)
		}
	}
	return out
}

// svidRenewals returns the SVID renewals the proxy logged since since whose
// SVID expires within maxTTL of the line.
func (c *cluster) svidRenewals(ctx context.Context, proxy *corev1.Pod, since metav1.Time, maxTTL time.Duration) []svidLog {
	var out []svidLog
	for _, l := range c.svids(ctx, proxy, since) {
		if l.Msg == "SPIFFE SVID renewed" && l.NotAfter.Sub(l.Time) <= maxTTL {
			out = append(out, l)
		}
	}
	return out
}
