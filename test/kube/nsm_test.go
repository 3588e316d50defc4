package kube_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nsmSocket is the NSMgr's socket on the node, where the chart looks for it.
const nsmSocket = "/var/lib/networkservicemesh/nsm.io.sock"

// TestNSM: NSM's registry, the node's NSMgr and forwarder run Ready with
// SPIFFE identities, the NSMgr's socket is on the node, the forwarder
// has registered with the NSMgr, which took the registration to the
// registry (each component logs "up" only once started; the forwarder
// only once registered), and the NSMgr knows its node.
func TestNSM(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pods := map[string]*corev1.Pod{}
	eventually(ctx, t, "NSM's pods Ready", func(ctx context.Context) error {
		list, err := c.client.CoreV1().Pods("nsm-system").List(ctx, metav1.ListOptions{})
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
			return fmt.Errorf("pods %v, want nsm-registry, nsmgr and forwarder", pods)
		}
		return nil
	})
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
	eventually(ctx, t, "the registry holds the forwarder", func(ctx context.Context) error {
		if out := c.logs(ctx, pods["nsm-registry"]); !strings.Contains(out, "for "+fwd.Name) {
			return fmt.Errorf("the registry's log does not name %s", fwd.Name)
		}
		return nil
	})
	// The NSMgr labels each connection with its node from NODE_NAME (SDK
	// clientinfo), which the proxy's network service matches targets on;
	// without it the SDK warns on every request and no target finds the proxy.
	if out := c.logs(ctx, pods["nsmgr"]); strings.Contains(out, "NODE_NAME is not set") {
		t.Errorf("the NSMgr has no NODE_NAME: %s", lastLines(out, 3))
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
