package kube_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// spireSockets is where the SPIRE agent serves the Workload API on the node.
const spireSockets = "/run/spire/sockets"

// repoPath returns the path of rel in this clone: go test runs the suite
// in its package's folder, test/kube (the binary's own file names are
// trimmed: make test-kube builds with -trimpath).
func repoPath(rel string) string {
	wd, err := os.Getwd()
	if err != nil {
		panic(fmt.Sprintf("the suite's working folder: %v", err))
	}
	return filepath.Join(wd, "..", "..", rel)
}

// scriptPath returns the path of scripts/cluster/NAME in this clone.
func scriptPath(name string) string { return repoPath(filepath.Join("scripts", "cluster", name)) }

// spiffeLabel selects the pods of the ClusterSPIFFEID nsm-workloads, NSM's
// (scripts/cluster/manifests/spire-workloads.yaml): each gets the SPIFFE ID
// spiffe://k8s.nsm/ns/<namespace>/pod/<pod>.
const spiffeLabel = "spiffe.io/spiffe-id"

// spiffeLabels are the labels of a pod that gets an SVID.
func spiffeLabels() map[string]string { return map[string]string{spiffeLabel: "true"} }

// nsmTrustDomain is the trust domain of NSM's SPIRE.
const nsmTrustDomain = "k8s.nsm"

// podSPIFFEID is the SPIFFE ID of a labelled pod.
func podSPIFFEID(ns, pod string) string {
	return "spiffe://" + nsmTrustDomain + "/ns/" + ns + "/pod/" + pod
}

// serviceAccount makes the service account name in namespace ns.
func (c *cluster) serviceAccount(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	_, err := c.client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestSPIRE: SPIRE's controller manager made the ClusterSPIFFEID of NSM's
// example; a pod labelled as it selects gets the SVID
// spiffe://k8s.nsm/ns/<namespace>/pod/<pod> from the node's agent, with no
// entry made by hand; a pod without the label gets none within 15 s, after
// the other one got its own.
func TestSPIRE(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	csid, err := c.dynamic.Resource(clusterSPIFFEIDs).Get(ctx, "nsm-workloads", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ClusterSPIFFEID nsm-workloads: %v", err)
	}
	if tmpl, _, _ := unstructured.NestedString(csid.Object, "spec", "spiffeIDTemplate"); tmpl != podSPIFFEID("{{.PodMeta.Namespace}}", "{{.PodMeta.Name}}") {
		t.Errorf("nsm-workloads' template %q", tmpl)
	}
	probe := func(labels map[string]string, name *string, timeout string) (string, error) {
		return c.runProbe(ctx, t, probePod{
			labels:    labels,
			created:   name,
			args:      []string{"-svid", "unix://" + spireSockets + "/agent.sock", "-timeout", timeout},
			hostPaths: map[string]string{spireSockets: spireSockets},
		})
	}
	var name string
	out, err := probe(spiffeLabels(), &name, "60s")
	if want := "svid " + podSPIFFEID("default", name); err != nil || !strings.Contains(out, want) {
		t.Fatalf("labelled pod: %v; output %q, want %q", err, out, want)
	}
	if out, err := probe(nil, nil, "15s"); err == nil {
		t.Fatalf("a pod without the label got an SVID: %q", out)
	}
}

// serviceAccountValues switch a release to SPIRE's other common scheme:
// service-account IDs from the chart's own ClusterSPIFFEID, the pods no
// longer labelled for NSM's (a null deletes the chart's default label).
const serviceAccountValues = `spire:
  idScheme: serviceAccount
  clusterSPIFFEIDs: {create: true}
  podLabels: {spiffe.io/spiffe-id: null}
`

// proxyNodeIDs is the chart's ClusterSPIFFEID of the proxies' per-node IDs
// (spire.nodeIDs, on by default).
const proxyNodeIDs = "causeway-" + chartNamespace + "-" + chartRelease + "-proxy-nodes"

// proxyNodeID is the SPIFFE ID the chart gives the proxy pod p.
func proxyNodeID(p *corev1.Pod) string {
	return "spiffe://" + nsmTrustDomain + "/ns/" + p.Namespace + "/sa/" + p.Spec.ServiceAccountName + "/node/" + p.Spec.NodeName
}

// useServiceAccountIDs upgrades the release to service-account IDs: the
// IPAM's and the nsp's pods replaced, then the proxy's by the chart's
// upgrade hook (the servers' IDs it accepts are in its environment: not a
// change made in place, and the hook says so); the proxy keeps its
// per-node SVID spiffe://k8s.nsm/ns/<namespace>/sa/<its service
// account>/node/<node>, which the IPAM and the nsp authorize in either
// scheme (a target replaced is served: the proxy allocated its
// addresses), and traffic flows again. helm waits with Helm 4's --wait
// (kstatus: until the proxy DaemonSet, OnDelete, has every pod updated,
// which the release's upgrade Job does meanwhile).
func (tr *trench) useServiceAccountIDs(ctx context.Context, t *testing.T) {
	tr.c.waitProxyReady(ctx, t)
	file := filepath.Join(t.TempDir(), "sa.yaml")
	if err := os.WriteFile(file, []byte(serviceAccountValues), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out := helm(t, "upgrade", chartRelease, repoPath("deployments/helm/causeway"), "--namespace", chartNamespace,
		"--reuse-values", "--values", file, "--wait", "--timeout", "5m")
	hookSaid(t, out, hookReplaced, "spec.containers[proxy].env")
	var proxy *corev1.Pod
	eventually(ctx, t, "the proxy Ready without NSM's label", func(ctx context.Context) error {
		if proxy = tr.c.waitProxyReady(ctx, t); proxy.Labels[spiffeLabel] != "" {
			return fmt.Errorf("%s still labelled %s", proxy.Name, spiffeLabel)
		}
		return nil
	})
	tr.waitServed(ctx, t)
	t.Logf("FIGURE: helm upgrade to service-account IDs to every target served again: %.1f s", time.Since(start).Seconds())
	want := proxyNodeID(proxy)
	eventually(ctx, t, "the proxy's SVID of its service account and node", func(ctx context.Context) error {
		got := tr.c.svids(ctx, proxy, metav1.Time{})
		if len(got) == 0 || got[len(got)-1].SPIFFEID != want {
			return fmt.Errorf("the proxy logged the SVIDs %v, want the last one %s", got, want)
		}
		return nil
	})
	tr.replaceTarget(ctx, t)
	tr.checkTraffic(ctx, t)
}
