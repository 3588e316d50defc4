package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/causeway-net/causeway/internal/testutil"
)

// kubeconfigPath is the test cluster's admin kubeconfig (scripts/cluster);
// CAUSEWAY_KUBECONFIG selects another.
func kubeconfigPath() string {
	if p := os.Getenv("CAUSEWAY_KUBECONFIG"); p != "" {
		return p
	}
	return "/var/lib/causeway-cluster/kubeconfig/admin.conf"
}

// cluster is the suite's handle on the test cluster.
type cluster struct {
	client  *kubernetes.Clientset
	dynamic *dynamic.DynamicClient // custom resources (NSM's registry, SPIRE's controller manager)
}

// newCluster connects to the test cluster. It needs root (the suite looks at
// the node's kernel state) and a cluster started by `make cluster`.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	testutil.RequireRoot(t)
	path := kubeconfigPath()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no test cluster (start one with `make cluster`): %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", path, err)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	// The client's connections end with the test (goleak). client-go wraps
	// its transport in round trippers that do not pass CloseIdleConnections
	// on; utilnet unwraps them.
	t.Cleanup(func() { utilnet.CloseIdleConnectionsFor(httpClient.Transport) })
	client, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	return &cluster{client: client, dynamic: dyn}
}

// eventually calls check every poll until it returns nil, and fails t with
// its last error when ctx ends first.
func eventually(ctx context.Context, t *testing.T, what string, check func(context.Context) error) {
	t.Helper()
	var err error
	for {
		if err = check(ctx); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// nodes returns the cluster's nodes: one for each node the cluster started.
func (c *cluster) nodes(ctx context.Context, t *testing.T) []corev1.Node {
	t.Helper()
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("nodes: %v", err)
	}
	if want := clusterNodes(t); len(nodes.Items) != len(want) {
		t.Fatalf("want the nodes %v, have %d", want, len(nodes.Items))
	}
	return nodes.Items
}

// image returns the reference of the cluster's own image NAME
// (scripts/cluster/images.sh), as the node reports it.
func (c *cluster) image(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	prefix := "localhost/kube/" + name + ":"
	for _, img := range c.nodes(ctx, t)[0].Status.Images {
		for _, n := range img.Names {
			if len(n) > len(prefix) && n[:len(prefix)] == prefix {
				return n
			}
		}
	}
	t.Fatalf("the node has no image %s*", prefix)
	return ""
}

// logs returns the logs of the first container of pod.
func (c *cluster) logs(ctx context.Context, pod *corev1.Pod) string {
	b, err := c.client.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return fmt.Sprintf("(no logs: %v)", err)
	}
	return string(b)
}

// jsonLogs returns the lines of the log of pod's container (since since,
// all of them with a zero since) that decode as JSON into a T; the
// components and the stubs log JSON lines (log/slog).
func jsonLogs[T any](ctx context.Context, c *cluster, pod *corev1.Pod, container string, since metav1.Time) []T {
	opts := &corev1.PodLogOptions{Container: container}
	if !since.IsZero() {
		opts.SinceTime = &since
	}
	b, err := c.client.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, opts).DoRaw(ctx)
	if err != nil {
		return nil
	}
	var out []T
	for _, line := range strings.Split(string(b), "\n") {
		var l T
		if json.Unmarshal([]byte(line), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}
