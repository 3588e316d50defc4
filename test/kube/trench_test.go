package kube_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// trench is one install of the chart with its LB and target stubs and the
// external host in front of the LBs, which the scenarios of TestTrench
// share (the destructive ones last).
type trench struct {
	c    *cluster
	ext  *external
	root []string // the node's root namespace before the install (rootState)
}

// TestTrench: the chart installed as a user does (example values, secure
// SPIFFE defaults), then the lab's LB and target stubs as pods, and traffic
// from outside through the VIPs; the scenarios after the first one take
// pods away and check that the trench serves again by itself.
func TestTrench(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	tr := c.startTrench(ctx, t)
	t.Run("Traffic", func(t *testing.T) { tr.checkTraffic(ctx, t) })
	t.Run("MeshAcrossNodes", func(t *testing.T) { tr.meshAcrossNodes(ctx, t) })
	t.Run("ServiceFromTarget", func(t *testing.T) { tr.reachServices(ctx, t) })
	t.Run("KubernetesServices", func(t *testing.T) { tr.kubeServices(ctx, t) })
	t.Run("TargetReplaced", func(t *testing.T) { tr.replaceTarget(ctx, t) })
	t.Run("VIPsAddedRemoved", func(t *testing.T) { tr.changeVIPs(ctx, t) })
	t.Run("TargetsScaled", func(t *testing.T) { tr.scaleTargets(ctx, t) })
	t.Run("TargetsAtScale", func(t *testing.T) { tr.scaleToMany(ctx, t) })
	t.Run("DestinationPortNATs", func(t *testing.T) { tr.portNATs(ctx, t) })
	t.Run("ConduitReAdded", func(t *testing.T) { tr.reAddConduit(ctx, t) })
	t.Run("IPAMReplaced", func(t *testing.T) { tr.replaceIPAM(ctx, t) })
	t.Run("ProxyReplaced", func(t *testing.T) { tr.replaceProxy(ctx, t) })
	t.Run("NSMReplaced", func(t *testing.T) {
		tr.replaceNSM(ctx, t)
		tr.checkTraffic(ctx, t)
	})
	t.Run("NSPAndCoreDNSReplaced", func(t *testing.T) { tr.replaceNSPAndDNS(ctx, t) })
	t.Run("RegistryReplaced", func(t *testing.T) { tr.replaceRegistry(ctx, t) })
	t.Run("SPIREReplaced", func(t *testing.T) { tr.replaceSPIRE(ctx, t) })
	t.Run("SVIDRotated", func(t *testing.T) { tr.rotateSVIDs(ctx, t) })
	t.Run("LBFrozen", func(t *testing.T) { tr.freezeLB(ctx, t) })
	t.Run("LBDeleted", func(t *testing.T) { tr.deleteLB(ctx, t) })
	t.Run("NodeLost", func(t *testing.T) { tr.loseNode(ctx, t) })
	t.Run("NodeDeleted", func(t *testing.T) { tr.deleteNode(ctx, t) })
	t.Run("TwoTrenches", func(t *testing.T) { tr.twoTrenches(ctx, t) })
	t.Run("HelmRollback", func(t *testing.T) { tr.rollbackVIPs(ctx, t) })
	t.Run("ServiceAccountIDs", func(t *testing.T) { tr.useServiceAccountIDs(ctx, t) })
	t.Run("UpgradeUninstall", func(t *testing.T) { tr.upgradeUninstall(ctx, t) })
}

// startTrench installs the chart and checks what it does without LBs (the
// IPAM and the configuration server Ready, the IPAM's store on a volume of
// the default class, the proxy registered with NSM with the IPAM's bridge
// addresses, its only failing check Egress), then starts the stubs and
// links the external host to the LBs.
func (c *cluster) startTrench(ctx context.Context, t *testing.T) *trench {
	t.Helper()
	root := rootState(t)
	start := time.Now()
	c.installChart(ctx, t)
	var proxy *corev1.Pod
	eventually(ctx, t, "the IPAM and nsp Ready, the proxy waiting for Egress only", func(ctx context.Context) error {
		ready, p, err := c.chartPods(ctx)
		if err != nil {
			return err
		}
		proxy = p
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

	c.startStubs(ctx, t)
	lbs := c.stubPods(ctx, t, lbDeployment, 2, "lb stub up")
	c.waitProxyReady(ctx, t)
	c.stubPods(ctx, t, targetsName, targetReplicas, "target connected")
	c.stubPods(ctx, t, lbDeployment, 2, "lb stub ready")
	t.Logf("FIGURE: helm install to every pod Ready (chart, 2 LBs, 3 targets): %.1f s", time.Since(start).Seconds())
	return &trench{c: c, ext: c.connectExternal(ctx, t, lbs), root: root}
}

// chartPods says which components of the chart have a Ready pod, and
// returns the proxy's pod (nil if none).
func (c *cluster) chartPods(ctx context.Context) (map[string]bool, *corev1.Pod, error) {
	list, err := c.client.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component"})
	if err != nil {
		return nil, nil, err
	}
	ready := map[string]bool{}
	var proxy *corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		name := p.Labels["app.kubernetes.io/component"]
		if strings.HasPrefix(name, "proxy-") { // proxy-<conduit>
			name, proxy = "proxy", p
		}
		ready[name] = podReady(p)
	}
	return ready, proxy, nil
}

// waitProxyReady waits for the proxy's pod Ready (no failing check) and
// returns it.
func (c *cluster) waitProxyReady(ctx context.Context, t *testing.T) *corev1.Pod {
	t.Helper()
	var proxy *corev1.Pod
	eventually(ctx, t, "the proxy Ready", func(ctx context.Context) error {
		ready, p, err := c.chartPods(ctx)
		if err != nil {
			return err
		}
		if proxy = p; p == nil || !ready["proxy"] {
			return fmt.Errorf("pods ready: %v", ready)
		}
		return nil
	})
	return proxy
}

// targetNames are the names of the running target pods.
func (tr *trench) targetNames(ctx context.Context, t *testing.T) []string {
	return podNames(tr.c.stubPods(ctx, t, targetsName, targetReplicas, "target connected"))
}

// podNames returns the names of pods.
func podNames(pods []*corev1.Pod) []string {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

// flows runs a batch of new flows of network from the external host to the
// echo service on vip.
func (tr *trench) flows(ctx context.Context, network string, vip netip.Addr, count int) traffic.Tally {
	addr, _ := echoAt(vip)
	return tr.flowsTo(ctx, network, addr, count)
}

// flowsTo runs a batch of new flows of network from the external host
// (its address of addr's family) to addr.
func (tr *trench) flowsTo(ctx context.Context, network string, addr netip.AddrPort, count int) traffic.Tally {
	local := extAddrs[addr.Addr().Is6()]
	return runFlows(ctx, network, traffic.Flows{NetNSPath: tr.ext.ns.Path(), Addr: addr, Local: local, Count: count, Attempts: 3})
}

// runFlows runs the flows f of network ("tcp" or "udp"); an error that
// ended the batch counts as a failed flow.
func runFlows(ctx context.Context, network string, f traffic.Flows) traffic.Tally {
	run := traffic.UDP
	if network == "tcp" {
		run = traffic.TCP
	}
	tally, err := run(ctx, f)
	if err != nil {
		tally.Errors++
	}
	return tally
}

// waitServed waits until a batch of TCP flows to each VIP is answered by
// every target, without a failure.
func (tr *trench) waitServed(ctx context.Context, t *testing.T) {
	t.Helper()
	tr.waitServedBy(ctx, t, chartVIPs, tr.targetNames(ctx, t))
}

// waitServedBy waits until a batch of TCP flows to each of vips is
// answered by each target of names (waitAnswered).
func (tr *trench) waitServedBy(ctx context.Context, t *testing.T, vips []netip.Addr, names []string) {
	t.Helper()
	for _, vip := range vips {
		addr, _ := echoAt(vip)
		tr.waitAnswered(ctx, t, "tcp", addr, names)
	}
}

// waitAnswered waits until a batch of flows of network from the external
// host to addr is answered by each target of names, without a failure;
// the batch grows with the targets, so that each is likely to get a flow.
func (tr *trench) waitAnswered(ctx context.Context, t *testing.T, network string, addr netip.AddrPort, names []string) {
	t.Helper()
	eventually(ctx, t, "every target answers "+network+" on "+addr.String(), func(ctx context.Context) error {
		tally := tr.flowsTo(ctx, network, addr, max(30, 10*len(names)))
		if tally.Errors != 0 {
			return fmt.Errorf("%s", tally)
		}
		for _, n := range names {
			if tally.Answers[n] == 0 {
				return fmt.Errorf("%s did not answer: %s", n, tally)
			}
		}
		return nil
	})
}

// checkTraffic: TCP and UDP, both families, from the external host to the
// VIPs: every flow answered, by every target, through both LBs (both links
// of the external host carry flows).
func (tr *trench) checkTraffic(ctx context.Context, t *testing.T) {
	t.Helper()
	tr.waitServed(ctx, t)
	names := tr.targetNames(ctx, t)
	for _, vip := range chartVIPs {
		for _, network := range []string{"tcp", "udp"} {
			before, err := traffic.LinkStats(tr.ext.ns.Path())
			if err != nil {
				t.Fatal(err)
			}
			tally := tr.flows(ctx, network, vip, 60)
			after, err := traffic.LinkStats(tr.ext.ns.Path())
			if err != nil {
				t.Fatal(err)
			}
			if tally.Errors != 0 {
				t.Errorf("%s to %s: %s", network, vip, tally)
				tr.logStubs(ctx, t)
			}
			for _, n := range names {
				if tally.Answers[n] == 0 {
					t.Errorf("%s to %s: target %s did not answer: %s", network, vip, n, tally)
				}
			}
			delta := traffic.Delta(before, after)
			for i, lb := range tr.ext.lbs {
				if d := delta[extLink(i)]; d.TxPackets == 0 || d.RxPackets == 0 {
					t.Errorf("%s to %s: LB %s not used (link %s: %+v)", network, vip, lb.Name, extLink(i), d)
				}
			}
			t.Logf("%s to %s: %s", network, vip, tally)
		}
	}
}

// logStubs logs the last lines of every stub's log (a failed check).
func (tr *trench) logStubs(ctx context.Context, t *testing.T) {
	list, err := tr.c.client.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app in (" + targetsName + "," + lbDeployment + ")"})
	if err != nil {
		t.Log(err)
		return
	}
	for i := range list.Items {
		t.Logf("%s:\n%s", list.Items[i].Name, lastLines(tr.c.logs(ctx, &list.Items[i]), 6))
	}
}
