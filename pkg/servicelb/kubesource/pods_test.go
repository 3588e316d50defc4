package kubesource

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/causeway-net/causeway/pkg/servicelb/kubesource/kubefake"
)

func pod(ns, name string, ready bool, labels map[string]string) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name), Labels: labels},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

// startPods runs NodePods on client until the test ends and waits for
// its cache; changes counts its change calls.
func startPods(t *testing.T, client *fake.Clientset) (*NodePods, *atomic.Int64) {
	t.Helper()
	var changes atomic.Int64
	return runNodePods(t, client, func() { changes.Add(1) }, WithLogger(testLogger(t))), &changes
}

// runNodePods runs NodePods of node-a with opts until the test ends and
// waits for its cache.
func runNodePods(t *testing.T, client *fake.Clientset, onChange func(), opts ...Option) *NodePods {
	t.Helper()
	n, err := NewNodePods(clientset{client}, "node-a", onChange, opts...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, n.Synced, waitFor, 5*time.Millisecond)
	return n
}

// A connection is matched to the node's pod of its name: namespace,
// labels, readiness (pod and link), deletion; one without a pod name, of
// an unknown pod, or of a name two namespaces use, is left out. The list
// is listed with the node's field selector.
func TestNodePodsTargets(t *testing.T) {
	web := map[string]string{"app": "web"}
	client := fake.NewClientset(pod("shop", "web-0", true, web), pod("shop", "web-1", false, web),
		pod("shop", "twin", true, web), pod("bank", "twin", true, web))
	n, changes := startPods(t, client)
	a4, a6 := netip.MustParseAddr("172.16.0.5"), netip.MustParseAddr("fd00::5")
	got := n.Targets([]Conn{
		{Pod: "web-0", Addrs: []netip.Addr{a4, a6}, Up: true},
		{Pod: "web-1", Addrs: []netip.Addr{a4}, Up: true},
		{Pod: "web-0", Addrs: []netip.Addr{a4}, Up: false},
		{Pod: "", Up: true}, {Pod: "gone", Up: true}, {Pod: "twin", Up: true},
	})
	require.Len(t, got, 3)
	assert.Equal(t, Target{Namespace: "shop", Pod: "web-0", UID: "uid-shop-web-0", Labels: web, Ready: true, Addrs: []netip.Addr{a4, a6}}, got[0])
	assert.False(t, got[1].Ready, "the pod is not ready")
	assert.False(t, got[2].Ready, "the connection's link is down")

	var sel string
	for _, a := range client.Actions() {
		if l, ok := a.(k8stesting.ListAction); ok && a.GetResource().Resource == "pods" {
			sel = l.GetListRestrictions().Fields.String()
		}
	}
	assert.Equal(t, "spec.nodeName=node-a", sel)

	// The pod turns not ready, then is deleted: each change is told.
	before := changes.Load()
	_, err := client.CoreV1().Pods("shop").UpdateStatus(context.Background(), pod("shop", "web-0", false, web), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return changes.Load() > before }, waitFor, 5*time.Millisecond)
	require.False(t, n.Targets([]Conn{{Pod: "web-0", Up: true}})[0].Ready)
	require.NoError(t, client.CoreV1().Pods("shop").Delete(context.Background(), "web-0", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return len(n.Targets([]Conn{{Pod: "web-0", Up: true}})) == 0 }, waitFor, 5*time.Millisecond)
	// A change of a pod that no connection names is not told; once one of
	// the twins is gone, the name is no longer ambiguous.
	before = changes.Load()
	n.Targets([]Conn{{Pod: "twin", Up: true}})
	_, err = client.CoreV1().Pods("shop").UpdateStatus(context.Background(), pod("shop", "web-1", true, web), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, client.CoreV1().Pods("bank").Delete(context.Background(), "twin", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return len(n.Targets([]Conn{{Pod: "twin", Up: true}})) == 1 }, waitFor, 5*time.Millisecond)
	require.Equal(t, before+1, changes.Load(), "told of twin (asked about), not of web-1 (changed before it)")
}

// A running Publisher publishes nothing before its inputs are ready (a
// start must not withdraw the slices of targets not yet read), then on
// each signal; a failed publish is tried again without a signal.
func TestPublisherRun(t *testing.T) {
	client := fake.NewClientset()
	var failing atomic.Bool
	client.PrependReactor("create", "endpointslices", func(k8stesting.Action) (bool, runtimeObject, error) {
		if failing.Load() {
			return true, nil, kubefake.ErrAPIDown
		}
		return false, nil, nil
	})
	pub, err := NewPublisher(clientset{client}, proxyName, "node-a", WithLogger(testLogger(t)))
	require.NoError(t, err)
	var ready atomic.Bool
	var tgts atomic.Value
	tgts.Store([]Target{target("web-0", "web", true, "172.16.0.5")})
	changed := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		pub.Run(ctx, Inputs{Ready: ready.Load, Changed: changed,
			Services: func() []*corev1.Service { return []*corev1.Service{service("shop", "web", "10.96.0.10")} },
			Targets:  func() []Target { return tgts.Load().([]Target) }})
	}()
	defer func() { cancel(); <-done }()
	sliceName := SliceName("web", "node-a", corev1.IPv4Protocol)
	exists := func() bool {
		_, err := client.DiscoveryV1().EndpointSlices("shop").Get(context.Background(), sliceName, metav1.GetOptions{})
		return err == nil
	}

	pub.Request()
	time.Sleep(50 * time.Millisecond)
	require.Zero(t, writes(client), "not ready: nothing written")
	failing.Store(true)
	ready.Store(true)
	changed <- struct{}{}
	require.Eventually(t, func() bool {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "create" {
				n++
			}
		}
		return n >= 2
	}, waitFor, 5*time.Millisecond, "a failed create is tried again, unasked")
	failing.Store(false)
	require.Eventually(t, exists, waitFor, 5*time.Millisecond, "published once the API takes it")

	tgts.Store([]Target(nil))
	changed <- struct{}{}
	require.Eventually(t, func() bool { return !exists() }, waitFor, 5*time.Millisecond, "the target gone: its slice too")
}
