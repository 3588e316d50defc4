package kube_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// deleteNode (two nodes or more; skipped on one): the node loseNode
// picks, stopped as by a power cut while the external host probes every
// VIP and, once the LBs have withdrawn its targets, deleted from the
// cluster, as an operator deletes a node that is gone for good. The
// cluster deletes its pods and the targets' Deployment runs them on the
// other nodes: every target is served with an address no other holds,
// and no flow is lost once the LBs have let the node's targets go. The
// IPAM keeps the node's subnets until their leases end, and says until
// when (it frees them then: pkg/ipam/nodewatch's tests). The node started
// again registers anew: its proxy is back with the bridge addresses it
// had (its node subnets, still leased), every target is served, no
// address is held twice.
func (tr *trench) deleteNode(ctx context.Context, t *testing.T) {
	nodes := tr.c.nodes(ctx, t)
	if len(nodes) < 2 {
		t.Skip("a node deleted needs two nodes or more (CLUSTER_NODES=3 make cluster)")
	}
	// A bound on it all happening at all, far above its figures.
	ctx, cancel := context.WithTimeout(ctx, 12*time.Minute)
	defer cancel()
	sn := tr.nodeToStop(ctx, t, nodes)
	node := sn.name
	bridge := tr.proxyBridge(ctx, t, tr.proxyOn(ctx, t, node))
	ipam := tr.c.runningPods(ctx, t, chartNamespace, "app.kubernetes.io/component=ipam")[0]
	sn.stop(ctx, t)
	start, withdrawn := sn.start, sn.withdrawn
	if err := tr.c.client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete node %s: %v", node, err)
	}
	tr.c.waitNodePodsGone(ctx, t, node)
	podsGone := time.Since(withdrawn)
	pods := tr.c.stubPods(ctx, t, targetsName, targetReplicas, "target connected")
	for _, p := range pods {
		if p.Spec.NodeName == node {
			t.Errorf("target %s still on the deleted node %s", p.Name, node)
		}
	}
	tr.waitServedBy(ctx, t, chartVIPs, podNames(pods))
	elsewhere := time.Since(withdrawn)
	checkUnique(t, tr.addrsOf(ctx, t, pods))
	until := "not checked: the IPAM ran on " + node
	if ipam.Spec.NodeName != node {
		until = tr.c.subnetsKeptUntil(ctx, t, ipam, node).Format(time.RFC3339)
	}
	time.Sleep(2 * time.Second)
	series := sn.probes()
	before, total, longest := sumSeries(window(series, traffic.Series.Before, withdrawn))
	noOutages(t, window(series, traffic.Series.After, withdrawn.Add(2*time.Second)), "the stopped node's targets withdrawn, then the node deleted", withdrawn)
	t.Logf("FIGURE: node %s stopped, then deleted once the LBs had withdrawn its targets (%.1f s after the stop; %d of %d probes lost until then, longest gap %s): its pods deleted by the cluster %.1f s after, its targets served on the other nodes %.1f s after; the IPAM keeps its subnets until %s",
		node, withdrawn.Sub(start).Seconds(), before, total, longest.Round(time.Millisecond), podsGone.Seconds(), elsewhere.Seconds(), until)

	back := time.Now()
	sn.startAgain(ctx, t)
	registered := time.Since(back)
	if got := tr.proxyBridge(ctx, t, tr.proxyOn(ctx, t, node)); !slices.Equal(got, bridge) {
		t.Errorf("the proxy of %s registered again has the bridge addresses %v, had %v", node, got, bridge)
	}
	tr.waitServed(ctx, t)
	checkUnique(t, tr.targetAddrs(ctx, t))
	t.Logf("FIGURE: node %s started again after its deletion: registered and Ready after %.1f s, its proxy serving with the bridge addresses it had (%v) and every target served after %.1f s",
		node, registered.Seconds(), bridge, time.Since(back).Seconds())
}

// proxyOn returns the Ready proxy pod of the example's conduit on node.
func (tr *trench) proxyOn(ctx context.Context, t *testing.T, node string) *corev1.Pod {
	t.Helper()
	for _, p := range tr.c.proxyPods(ctx, t) {
		if p.Spec.NodeName == node {
			return p
		}
	}
	t.Fatalf("no proxy on %s", node)
	return nil
}

// waitNodePodsGone waits until no pod of any namespace is bound to node
// (the cluster's garbage collector deletes the pods of a deleted node).
func (c *cluster) waitNodePodsGone(ctx context.Context, t *testing.T, node string) {
	t.Helper()
	eventually(ctx, t, "the pods of the deleted node "+node+" deleted", func(ctx context.Context) error {
		list, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d left, %s/%s among them", len(list.Items), list.Items[0].Namespace, list.Items[0].Name)
		}
		return nil
	})
}

// subnetsKeptUntil waits for the IPAM's log to say that it keeps the
// subnets of the deleted node until their leases end, and returns when
// they end, which must be in the future.
func (c *cluster) subnetsKeptUntil(ctx context.Context, t *testing.T, ipam *corev1.Pod, node string) time.Time {
	t.Helper()
	var until time.Time
	eventually(ctx, t, "the IPAM keeping the subnets of the deleted node "+node, func(ctx context.Context) error {
		type keptLine struct {
			Msg   string    `json:"msg"`
			Node  string    `json:"node"`
			Until time.Time `json:"until"`
		}
		for _, l := range jsonLogs[keptLine](ctx, c, ipam, "ipam", metav1.Time{}) {
			if l.Node == node && strings.Contains(l.Msg, "kept until their leases end") {
				until = l.Until
			}
		}
		if until.IsZero() {
			return fmt.Errorf("not logged yet")
		}
		return nil
	})
	if !until.After(time.Now()) {
		t.Errorf("the IPAM keeps the deleted node's subnets until %s, which is past: their leases were renewed until the stop", until)
	}
	return until
}
