package kube_test

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// loseNode: a node stopped as by a power cut (scripts/cluster/node.sh
// stop: its link to the cluster network down, its kubelet, containers and
// containerd gone) while the external host probes every VIP. The LBs
// withdraw its targets once the cluster marks their pods not Ready, and
// the other targets carry every flow from then on (the flows lost before,
// and the time until the LBs let go, are figures). The node started again:
// its pods come back by themselves, every target is served with an address
// no other holds. Then the node's kubelet and containerd restarted, the
// node kept up: its targets keep their addresses, and no flow is lost
// beyond a blip. The node lost is one without an LB (the external host
// reaches the LBs directly), with the most targets, preferably without the
// IPAM.
func (tr *trench) loseNode(ctx context.Context, t *testing.T) {
	nodes := tr.c.nodes(ctx, t)
	if len(nodes) < 2 {
		t.Skip("a node lost needs two nodes or more (CLUSTER_NODES=3 make cluster)")
	}
	// A bound on it all happening at all, far above its figures.
	ctx, cancel := context.WithTimeout(ctx, 12*time.Minute)
	defer cancel()
	sn := tr.nodeToStop(ctx, t, nodes)
	sn.stop(ctx, t)
	node, lost, start, withdrawn := sn.name, sn.targets, sn.start, sn.withdrawn
	time.Sleep(10 * time.Second)
	series := sn.probes()
	before, _, _ := sumSeries(window(series, traffic.Series.Before, withdrawn))
	lostN, total, longest := sumSeries(series)
	t.Logf("FIGURE: node %s stopped (%d targets of %d on it): the LBs withdrew its targets after %.1f s; %d of %d probes lost until then (every VIP, TCP and UDP; longest gap %s), %d in the 10 s after",
		node, len(lost), targetReplicas, withdrawn.Sub(start).Seconds(), before, total, longest.Round(time.Millisecond), lostN-before)
	// The LBs may still send a flow or two to the lost targets while their
	// routes change: 2 s after the withdrawal, none may fail.
	noOutages(t, window(series, traffic.Series.After, withdrawn.Add(2*time.Second)), "the node's targets withdrawn", withdrawn)

	back := time.Now()
	sn.startAgain(ctx, t)
	ready := time.Since(back)
	tr.c.waitNodePodsBack(ctx, t, node, back)
	podsBack := time.Since(back)
	pods := tr.c.stubPods(ctx, t, targetsName, targetReplicas, "target connected")
	connected := time.Since(back)
	addrs := tr.addrsOf(ctx, t, pods)
	checkUnique(t, addrs)
	var all []netip.Addr
	for _, list := range addrs {
		all = append(all, list...)
	}
	tr.waitLBsRoute(ctx, t, "via every target's addresses", func(vip netip.Addr, via []netip.Addr) bool {
		for _, a := range all {
			if a.Is4() == vip.Is4() && !slices.Contains(via, a) {
				return false
			}
		}
		return true
	})
	routed := time.Since(back)
	tr.waitServed(ctx, t)
	t.Logf("FIGURE: node %s started again: Ready after %.1f s, every pod of it running again after %.1f s, every target connected after %.1f s, in every LB's routes after %.1f s, every target served after %.1f s",
		node, ready.Seconds(), podsBack.Seconds(), connected.Seconds(), routed.Seconds(), time.Since(back).Seconds())

	tr.restartNodeRuntime(ctx, t, node, addrs)
}

// stoppedNode is a node of the cluster that a scenario stops.
type stoppedNode struct {
	tr      *trench
	name    string
	targets []*corev1.Pod                    // its target pods before the stop
	addrs   []netip.Addr                     // theirs
	probes  func() map[string]traffic.Series // stop's probeEveryVIP, begun a second before the stop
	// start is when the stop began, withdrawn when every LB had let its
	// targets go.
	start, withdrawn time.Time
	down             bool
}

// nodeToStop picks the node nodeToLose picks, with its targets' addresses;
// stop stops it.
func (tr *trench) nodeToStop(ctx context.Context, t *testing.T, nodes []corev1.Node) *stoppedNode {
	t.Helper()
	sn := &stoppedNode{tr: tr}
	sn.name, sn.targets = tr.nodeToLose(ctx, t, nodes)
	for _, list := range tr.addrsOf(ctx, t, sn.targets) {
		sn.addrs = append(sn.addrs, list...)
	}
	t.Logf("the node to stop: %s, with the targets %v (%v)", sn.name, podNames(sn.targets), sn.addrs)
	return sn
}

// stop starts probing every VIP, stops the node (node.sh stop) and waits
// until every LB routes the VIPs without its targets. The node is started
// again when t ends if the scenario has not done it (startAgain).
func (sn *stoppedNode) stop(ctx context.Context, t *testing.T) {
	t.Helper()
	tr := sn.tr
	t.Cleanup(func() {
		if sn.down {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			tr.startNode(ctx, t, sn.name)
		}
	})
	sn.probes = tr.probeEveryVIP(ctx, t)
	time.Sleep(time.Second)
	sn.start = time.Now()
	nodeScript(t, "stop", sn.name)
	sn.down = true
	tr.waitLBsRoute(ctx, t, "without the stopped node's targets "+fmt.Sprint(sn.addrs), func(vip netip.Addr, via []netip.Addr) bool {
		return !slices.ContainsFunc(sn.addrs, func(a netip.Addr) bool { return slices.Contains(via, a) })
	})
	sn.withdrawn = time.Now()
}

// startAgain starts the node again (startNode).
func (sn *stoppedNode) startAgain(ctx context.Context, t *testing.T) {
	t.Helper()
	sn.tr.startNode(ctx, t, sn.name)
	sn.down = false
}

// nodeToLose picks the node loseNode stops: one without an LB pod, with
// the most targets, preferably without the IPAM's pod; it returns its name
// and its targets' pods.
func (tr *trench) nodeToLose(ctx context.Context, t *testing.T, nodes []corev1.Node) (string, []*corev1.Pod) {
	t.Helper()
	targets := byNode(tr.c.stubPods(ctx, t, targetsName, targetReplicas, "target connected"))
	ipam := map[string]bool{}
	for _, p := range tr.c.runningPods(ctx, t, chartNamespace, "app.kubernetes.io/component=ipam") {
		ipam[p.Spec.NodeName] = true
	}
	best, score := "", -1
	for _, n := range nodes {
		if slices.ContainsFunc(tr.ext.lbs, func(lb *corev1.Pod) bool { return lb.Spec.NodeName == n.Name }) {
			continue
		}
		s := 2 * len(targets[n.Name])
		if !ipam[n.Name] {
			s++
		}
		if s > score {
			best, score = n.Name, s
		}
	}
	if best == "" {
		t.Fatalf("every node has an LB pod: no node to lose")
	}
	return best, targets[best]
}

// window returns each series of probeEveryVIP cut by cut (Series.Before
// or Series.After) at at.
func window(series map[string]traffic.Series, cut func(traffic.Series, time.Time) traffic.Series, at time.Time) map[string]traffic.Series {
	out := make(map[string]traffic.Series, len(series))
	for name, s := range series {
		out[name] = cut(s, at)
	}
	return out
}

// waitLBsRoute waits until every LB routes every chart VIP via a set of
// gateways that ok accepts.
func (tr *trench) waitLBsRoute(ctx context.Context, t *testing.T, what string, ok func(vip netip.Addr, via []netip.Addr) bool) {
	t.Helper()
	var paths []string
	for _, lb := range tr.ext.lbs {
		paths = append(paths, tr.c.podNetNS(ctx, t, lb, "stub"))
	}
	eventually(ctx, t, "every LB routes the VIPs "+what, func(context.Context) error {
		for i, path := range paths {
			for _, vip := range chartVIPs {
				if via := lbGateways(t, path, vip); !ok(vip, via) {
					return fmt.Errorf("LB %s routes %s via %v", tr.ext.lbs[i].Name, vip, via)
				}
			}
		}
		return nil
	})
}

// restartNodeRuntime restarts node's kubelet and containerd (node.sh
// restart) while the external host probes every VIP: the targets keep
// addrs, and no flow is lost beyond a blip.
func (tr *trench) restartNodeRuntime(ctx context.Context, t *testing.T, node string, addrs map[string][]netip.Addr) {
	t.Helper()
	stop := tr.probeEveryVIP(ctx, t)
	time.Sleep(time.Second)
	start := time.Now()
	nodeScript(t, "restart", node)
	tr.c.waitNodeHeard(ctx, t, node, start)
	time.Sleep(5 * time.Second)
	tr.waitServed(ctx, t)
	lost, total, longest := noOutages(t, stop(), "the kubelet and containerd of "+node+" restarted", start)
	t.Logf("FIGURE: kubelet and containerd of node %s restarted: %d of %d probes lost (every VIP, TCP and UDP), longest gap %s",
		node, lost, total, longest.Round(time.Millisecond))
	checkKept(t, addrs, tr.targetAddrs(ctx, t))
}

// startNode starts node again (node.sh start) and waits until the cluster
// has heard from its kubelet since and the node is Ready.
func (tr *trench) startNode(ctx context.Context, t *testing.T, node string) {
	t.Helper()
	start := time.Now()
	nodeScript(t, "start", node)
	tr.c.waitNodeHeard(ctx, t, node, start)
}

// waitNodeHeard waits until node is Ready by a heartbeat of its kubelet
// after since.
func (c *cluster) waitNodeHeard(ctx context.Context, t *testing.T, node string, since time.Time) {
	t.Helper()
	eventually(ctx, t, node+" Ready, heard from since "+since.Format(time.RFC3339), func(ctx context.Context) error {
		n, err := c.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status != corev1.ConditionTrue || cond.LastHeartbeatTime.Time.Before(since.Truncate(time.Second)) {
					return fmt.Errorf("Ready %s, last heard %s", cond.Status, cond.LastHeartbeatTime.Format(time.RFC3339))
				}
				return nil
			}
		}
		return fmt.Errorf("no Ready condition")
	})
}

// waitNodePodsBack waits until every pod of node (of every namespace; the
// Jobs' finished ones aside) is Ready with each of its containers started
// after since: the kubelet has started them again after the node's stop.
func (c *cluster) waitNodePodsBack(ctx context.Context, t *testing.T, node string, since time.Time) {
	t.Helper()
	eventually(ctx, t, "every pod of "+node+" Ready, its containers started again", func(ctx context.Context) error {
		list, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return err
		}
		for i := range list.Items {
			p := &list.Items[i]
			if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			if !podReady(p) {
				return fmt.Errorf("%s/%s not Ready", p.Namespace, p.Name)
			}
			for _, cs := range p.Status.ContainerStatuses {
				if run := cs.State.Running; run == nil || run.StartedAt.Time.Before(since.Truncate(time.Second)) {
					return fmt.Errorf("%s/%s: container %s not started again (%+v)", p.Namespace, p.Name, cs.Name, cs.State)
				}
			}
		}
		return nil
	})
}

// nodeScript runs scripts/cluster/node.sh action on node (causeway-nodeI).
func nodeScript(t *testing.T, action, node string) {
	t.Helper()
	index, ok := strings.CutPrefix(node, "causeway-node")
	if !ok {
		t.Fatalf("node %s: not one of the cluster's", node)
	}
	out, err := exec.Command(scriptPath("node.sh"), action, index).CombinedOutput()
	if err != nil {
		t.Fatalf("node.sh %s %s: %v: %s", action, index, err, out)
	}
}
