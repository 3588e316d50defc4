package kube_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ipamReplicas is how many IPAM pods the replicated install runs, all on
// the cluster's one node (ipam.antiAffinity preferred, the default).
const ipamReplicas = 3

// ipamLease is the Lease the chart's replicas share.
const ipamLease = "causeway-ipam-" + chartRelease

// TestIPAMReplicas: the chart installed with ipam.replicas: 3 (the IPAM's
// store in custom resources on the Kubernetes API, no volume), every
// replica Ready (the standbys forward to the leader); then the leader's
// pod killed while the external host probes the VIP: traffic is not cut
// (the data path does not ask the IPAM), the Lease moves to another
// replica (or to the killed pod's replacement, the same identity, when it
// is back first), a target replaced meanwhile gets addresses nobody else
// holds, the others keep theirs, and every replica is Ready again.
func TestIPAMReplicas(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	tr := c.startReplicatedTrench(ctx, t)
	t.Run("Traffic", func(t *testing.T) { tr.checkTraffic(ctx, t) })
	t.Run("LeaderKilled", func(t *testing.T) { tr.killIPAMLeader(ctx, t) })
}

// installReplicated installs the chart as installChart does (example
// values, this clone's images, nothing for SPIRE), with ipam.replicas, and
// removes it with the IPAM's records and Lease (which helm uninstall
// leaves, as a database would) when t ends.
func (c *cluster) installReplicated(ctx context.Context, t *testing.T) {
	t.Helper()
	tag := os.Getenv("CAUSEWAY_IMAGE_TAG")
	if tag == "" {
		t.Fatal("CAUSEWAY_IMAGE_TAG names the images to install (make test-kube sets it)")
	}
	repo, btag, _ := strings.Cut(c.image(ctx, t, "busybox"), ":")
	set := []string{"images.sysctlInit.repository=" + repo, "images.sysctlInit.tag=" + btag}
	for _, b := range []string{"proxy", "ipam", "nsp"} {
		set = append(set, "images."+b+".repository=localhost/causeway/"+b, "images."+b+".tag="+tag)
	}
	helm(t, "install", chartRelease, repoPath("deployments/helm/causeway"), "--namespace", chartNamespace,
		"--create-namespace", "--values", repoPath(chartExample), "--set-string", strings.Join(set, ","),
		"--set", fmt.Sprintf("ipam.replicas=%d", ipamReplicas))
	t.Cleanup(func() {
		_ = exec.Command(helmPath, "uninstall", chartRelease, "--namespace", chartNamespace, "--wait", "--ignore-not-found",
			"--kubeconfig", kubeconfigPath()).Run()
		for _, what := range [][]string{{"ipampools,ipamblocks", "--all"}, {"lease", ipamLease}} {
			out, err := exec.Command(kubectlPath, append([]string{"--kubeconfig", kubeconfigPath(), "-n", chartNamespace,
				"delete", "--ignore-not-found"}, what...)...).CombinedOutput()
			if err != nil {
				t.Errorf("kubectl delete %v: %v\n%s", what, err, out)
			}
		}
	})
}

// startReplicatedTrench is startTrench with the replicated IPAM: every
// replica Ready, no claim, the Lease held by one of them.
func (c *cluster) startReplicatedTrench(ctx context.Context, t *testing.T) *trench {
	t.Helper()
	root := rootState(t)
	start := time.Now()
	c.installReplicated(ctx, t)
	eventually(ctx, t, "every IPAM replica and the nsp Ready, the proxy waiting for Egress only", func(ctx context.Context) error {
		ready, proxy, err := c.chartPods(ctx)
		if err != nil {
			return err
		}
		if n, err := c.readyIPAMs(ctx); err != nil || n != ipamReplicas {
			return fmt.Errorf("IPAM replicas Ready: %d (%v)", n, err)
		}
		if !ready["nsp"] || proxy == nil {
			return fmt.Errorf("pods ready: %v", ready)
		}
		return c.proxyWaitsOnlyFor(ctx, proxy, "Egress")
	})
	t.Logf("FIGURE: helm install with %d IPAM replicas to every replica and the nsp Ready: %.1f s", ipamReplicas, time.Since(start).Seconds())
	claims, err := c.client.CoreV1().PersistentVolumeClaims(chartNamespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(claims.Items) != 0 {
		t.Errorf("claims in %s: %v, %d (the replicated IPAM has none)", chartNamespace, err, len(claims.Items))
	}
	t.Logf("IPAM leader: %s", c.ipamLeader(ctx, t))

	c.startStubs(ctx, t)
	lbs := c.stubPods(ctx, t, lbDeployment, 2, "lb stub up")
	c.waitProxyReady(ctx, t)
	c.stubPods(ctx, t, targetsName, targetReplicas, "target connected")
	c.stubPods(ctx, t, lbDeployment, 2, "lb stub ready")
	return &trench{c: c, ext: c.connectExternal(ctx, t, lbs), root: root}
}

// readyIPAMs counts the IPAM's Ready pods.
func (c *cluster) readyIPAMs(ctx context.Context) (int, error) {
	list, err := c.client.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=ipam"})
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		if p := &list.Items[i]; p.DeletionTimestamp == nil && podReady(p) {
			n++
		}
	}
	return n, nil
}

// ipamLeader returns the pod that holds the IPAM's Lease.
func (c *cluster) ipamLeader(ctx context.Context, t *testing.T) string {
	t.Helper()
	var holder string
	eventually(ctx, t, "the IPAM's Lease held", func(ctx context.Context) error {
		l, err := c.client.CoordinationV1().Leases(chartNamespace).Get(ctx, ipamLease, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return fmt.Errorf("no holder")
		}
		holder = *l.Spec.HolderIdentity
		return nil
	})
	return holder
}

// killIPAMLeader kills the leader's pod (no grace: it neither flushes nor
// releases the Lease) while the external host probes the VIP, and replaces
// a target while the next leader takes over.
func (tr *trench) killIPAMLeader(ctx context.Context, t *testing.T) {
	c := tr.c
	proxy := c.waitProxyReady(ctx, t)
	bridge := tr.proxyBridge(ctx, t, proxy)
	before := tr.targetAddrs(ctx, t)
	leader := c.ipamLeader(ctx, t)
	old, err := c.client.CoreV1().Pods(chartNamespace).Get(ctx, leader, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stop := tr.proberOn(ctx, t)
	time.Sleep(time.Second)
	start := time.Now()
	zero := int64(0)
	if err := c.client.CoreV1().Pods(chartNamespace).Delete(ctx, leader, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	// A target replaced now asks the IPAM (through the proxy and whichever
	// replica the Service picks) while the Lease has not moved yet.
	var victim string
	for name, list := range before {
		if victim == "" || list[0].Compare(before[victim][0]) > 0 {
			victim = name
		}
	}
	after := tr.deleteTarget(ctx, t, victim)
	served := time.Since(start)
	// Another replica takes the Lease, or the StatefulSet's new pod of the
	// same name (the same identity) gets back first and renews it.
	eventually(ctx, t, "the Lease held by a live replica", func(ctx context.Context) error {
		h := c.ipamLeader(ctx, t)
		if h != leader {
			return nil
		}
		p, err := c.client.CoreV1().Pods(chartNamespace).Get(ctx, h, metav1.GetOptions{})
		if err != nil || p.UID == old.UID || !podReady(p) {
			return fmt.Errorf("still %s, not replaced and Ready yet (%v)", h, err)
		}
		return nil
	})
	next := c.ipamLeader(ctx, t)
	eventually(ctx, t, "the killed replica back and every replica Ready", func(ctx context.Context) error {
		p, err := c.client.CoreV1().Pods(chartNamespace).Get(ctx, leader, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID == old.UID || !podReady(p) {
			return fmt.Errorf("%s not replaced and Ready yet", leader)
		}
		if n, err := c.readyIPAMs(ctx); err != nil || n != ipamReplicas {
			return fmt.Errorf("IPAM replicas Ready: %d (%v)", n, err)
		}
		return nil
	})
	back := time.Since(start)
	tr.waitServed(ctx, t)
	time.Sleep(time.Second)
	series := stop()

	checkUnique(t, after)
	checkKept(t, before, after)
	if got := tr.proxyBridge(ctx, t, c.waitProxyReady(ctx, t)); !slices.Equal(got, bridge) {
		t.Errorf("the proxy's bridge had %v, now %v", bridge, got)
	}
	t.Logf("FIGURE: IPAM leader pod %s killed: a replaced target served with new addresses after %.1f s; the Lease went to %s; %d replicas Ready again after %.1f s; %d of %d probes lost",
		leader, served.Seconds(), next, ipamReplicas, back.Seconds(), series.Failures(), len(series))
	if !noOutage(t, series, "the IPAM's leader was killed", start) {
		tr.logPods(ctx, t, chartNamespace, "app.kubernetes.io/component=ipam")
		tr.logStubs(ctx, t)
	}
	tr.replaceTarget(ctx, t)
}
