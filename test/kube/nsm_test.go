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

// TestNSM: NSM's registry-k8s, the node's nsmgr and forwarder run Ready,
// each with its pod's SPIFFE ID (NSM's pods carry the ClusterSPIFFEID's
// label), the nsmgr's socket is on the node, the forwarder has registered
// with the nsmgr, which took the registration to the registry: an endpoint
// resource named after the forwarder's pod, for NSM's forwarder service.
// The nsmgr knows its node.
func TestNSM(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pods := map[string]*corev1.Pod{}
	eventually(ctx, t, "NSM's pods Ready", func(ctx context.Context) error {
		list, err := c.client.CoreV1().Pods(nsmNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range list.Items {
			p := &list.Items[i]
			if !podReady(p) {
				return fmt.Errorf("%s not Ready", p.Name)
			}
			pods[p.Labels["app"]] = p
		}
		if len(pods) != 3 {
			return fmt.Errorf("pods %v, want registry, nsmgr and forwarder", pods)
		}
		return nil
	})
	for app, p := range pods {
		if p.Labels[spiffeLabel] != "true" {
			t.Errorf("%s's pod %s has no %s label: it gets no SVID", app, p.Name, spiffeLabel)
		}
	}
	if fi, err := os.Stat(nsmSocket); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("%s: %v", nsmSocket, err)
	}
	fwd := pods["forwarder"]
	eventually(ctx, t, "the forwarder registered", func(ctx context.Context) error {
		if out := c.logs(ctx, fwd); !strings.Contains(out, `"msg":"up"`) {
			return fmt.Errorf("forwarder log: %s", out)
		}
		return nil
	})
	eventually(ctx, t, "the registry's resource of the forwarder", func(ctx context.Context) error {
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
	// The nsmgr labels each connection with its node from NODE_NAME (SDK
	// clientinfo), which the proxy's network service matches targets on;
	// without it the SDK warns on every request and no target finds the proxy.
	if out := c.logs(ctx, pods["nsmgr"]); strings.Contains(out, "NODE_NAME is not set") {
		t.Errorf("the nsmgr has no NODE_NAME: %s", lastLines(out, 3))
	}
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
