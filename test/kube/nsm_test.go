package kube_test

import (
	"context"
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
)

// nsmSocket is the NSMgr's socket on the node, where the chart looks for it.
const nsmSocket = "/var/lib/networkservicemesh/nsm.io.sock"

// nsmNamespace is where NSM runs (scripts/cluster/manifests/nsm.yaml); its
// registry keeps the registrations there as custom resources.
const nsmNamespace = "nsm-system"

// nseResource is the registry-k8s's custom resource of an endpoint.
var nseResource = schema.GroupVersionResource{Group: "networkservicemesh.io", Version: "v1", Resource: "networkserviceendpoints"}

// TestNSM: NSM's registry-k8s and, on every node, an nsmgr and a
// forwarder run Ready, each with its pod's SPIFFE ID (NSM's pods carry the
// ClusterSPIFFEID's label), the nsmgr's socket is on its node, each
// forwarder has registered with its nsmgr, which took the registration to
// the registry: an endpoint resource named after the forwarder's pod, for
// NSM's forwarder service. Each nsmgr knows its node.
func TestNSM(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes := clusterNodes(t)
	var pods []*corev1.Pod
	eventually(ctx, t, "NSM's pods Ready", func(ctx context.Context) error {
		list, err := c.client.CoreV1().Pods(nsmNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pods = nil
		perNode := map[string]int{}
		for i := range list.Items {
			p := &list.Items[i]
			if !podReady(p) {
				return fmt.Errorf("%s not Ready", p.Name)
			}
			pods = append(pods, p)
			perNode[p.Labels["app"]+" "+p.Spec.NodeName]++
			perNode[p.Labels["app"]]++
		}
		for _, node := range nodes {
			for _, app := range []string{"nsmgr", "forwarder"} {
				if perNode[app+" "+node] != 1 {
					return fmt.Errorf("%d pods of %s on node %s, want one", perNode[app+" "+node], app, node)
				}
			}
		}
		if perNode["registry"] != 1 || len(pods) != 1+2*len(nodes) {
			return fmt.Errorf("pods %v, want a registry and an nsmgr and a forwarder on each of %v", perNode, nodes)
		}
		return nil
	})
	for _, p := range pods {
		if p.Labels[spiffeLabel] != "true" {
			t.Errorf("%s's pod %s has no %s label: it gets no SVID", p.Labels["app"], p.Name, spiffeLabel)
		}
	}
	for _, node := range nodes {
		if fi, err := os.Stat(nodePath(t, node, nsmSocket)); err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Fatalf("%s on node %s: %v", nsmSocket, node, err)
		}
	}
	for _, p := range pods {
		switch p.Labels["app"] {
		case "forwarder":
			checkForwarderRegistered(ctx, t, c, p)
		case "nsmgr":
			// The nsmgr labels each connection with its node from NODE_NAME (SDK
			// clientinfo), which the proxy's network service matches targets on;
			// without it the SDK warns on every request and no target finds the proxy.
			if out := c.logs(ctx, p); strings.Contains(out, "NODE_NAME is not set") {
				t.Errorf("the nsmgr %s has no NODE_NAME: %s", p.Name, lastLines(out, 3))
			}
		}
	}
}

// checkForwarderRegistered: the forwarder fwd says it is up, and the
// registry holds its endpoint resource for NSM's forwarder service.
func checkForwarderRegistered(ctx context.Context, t *testing.T, c *cluster, fwd *corev1.Pod) {
	t.Helper()
	eventually(ctx, t, "the forwarder "+fwd.Name+" registered", func(ctx context.Context) error {
		if out := c.logs(ctx, fwd); !strings.Contains(out, `"msg":"up"`) {
			return fmt.Errorf("forwarder log: %s", out)
		}
		return nil
	})
	eventually(ctx, t, "the registry's resource of the forwarder "+fwd.Name, func(ctx context.Context) error {
		nse, err := c.dynamic.Resource(nseResource).Namespace(nsmNamespace).Get(ctx, fwd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		names, _, _ := unstructured.NestedStringSlice(nse.Object, "spec", "network_service_names")
		if !slices.Contains(names, "forwarder") {
			return fmt.Errorf("endpoint %s: services %v, want forwarder", fwd.Name, names)
		}
		return nil
	})
}

// podReady says whether pod's Ready condition is true.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
