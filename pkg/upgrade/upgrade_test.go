package upgrade

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ns = "causeway"

var nodes = []string{"node-1", "node-2", "node-3"}

// template is the proxy pod template of image tag tag.
func template(tag string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "proxy", "app.kubernetes.io/version": tag}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "sysctl-init", Image: "busybox:" + tag}},
			Containers:     []corev1.Container{{Name: "proxy", Image: "causeway/proxy:" + tag}},
		},
	}
}

func revision(ds *appsv1.DaemonSet, hash string, n int64, t corev1.PodTemplateSpec) *appsv1.ControllerRevision {
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": t}})
	if err != nil {
		panic(err)
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: ds.Name + "-" + hash, Namespace: ns,
			Labels:          map[string]string{"app": "proxy", hashLabel: hash},
			OwnerReferences: []metav1.OwnerReference{owner(ds)}},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: n,
	}
}

func owner(ds *appsv1.DaemonSet) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &yes}
}

// cluster is a fake API server with a DaemonSet upgraded from "v1" to the
// template next (revision "h2"), its pods made from "v1" (revision "h1"),
// and a fake kubelet and DaemonSet controller.
type cluster struct {
	cs *fake.Clientset
	ds *appsv1.DaemonSet

	mu     sync.Mutex
	broken map[string]bool // nodes whose restarted proxy never gets ready
	ids    int
	// maxAway is the most pods of other nodes seen not ready when a pod
	// was patched or deleted; actions the patches and deletes, in order.
	maxAway int
	actions []string

	cancel context.CancelFunc
	done   chan struct{}
}

func newCluster(t *testing.T, next corev1.PodTemplateSpec, mod func(pod *corev1.Pod)) *cluster {
	t.Helper()
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "proxy-a-lb", Namespace: ns, UID: "ds-uid", Generation: 2,
			Labels: map[string]string{"causeway.io/conduit": "lb"}},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "proxy"}},
			Template:       next,
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
		},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 2},
	}
	objs := []runtime.Object{ds, revision(ds, "h1", 1, template("v1")), revision(ds, "h2", 2, next)}
	c := &cluster{ds: ds, broken: map[string]bool{}}
	for _, n := range nodes {
		pod := c.newPod(template("v1"), n, "h1")
		if mod != nil {
			mod(pod)
		}
		objs = append(objs, pod)
	}
	c.cs = fake.NewClientset(objs...)
	c.cs.PrependReactor("*", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		var name string
		switch a := a.(type) {
		case k8stesting.PatchAction:
			name = a.GetName()
		case k8stesting.DeleteAction:
			name = a.GetName()
		default:
			return false, nil, nil
		}
		away := 0
		for _, p := range c.pods(t) {
			if p.Name != name && !podReady(p) {
				away++
			}
		}
		c.mu.Lock()
		c.maxAway = max(c.maxAway, away)
		c.actions = append(c.actions, a.GetVerb()+" "+name)
		c.mu.Unlock()
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	go c.run(ctx, t)
	t.Cleanup(c.stop)
	return c
}

func (c *cluster) stop() {
	c.cancel()
	<-c.done
}

func (c *cluster) newPod(t corev1.PodTemplateSpec, node, hash string) *corev1.Pod {
	c.ids++
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("proxy-a-lb-%d", c.ids), Namespace: ns,
			UID: types.UID(fmt.Sprintf("pod-uid-%d", c.ids)), Labels: map[string]string{hashLabel: hash, generationLabel: "1"},
			OwnerReferences: []metav1.OwnerReference{owner(c.ds)}},
		Spec: *t.Spec.DeepCopy(),
	}
	for k, v := range t.Labels {
		pod.Labels[k] = v
	}
	pod.Spec.NodeName = node
	return pod
}

// pods reads the pods from the fake's tracker (reactors must not call the
// clientset).
func (c *cluster) pods(t *testing.T) []*corev1.Pod {
	obj, err := c.cs.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), ns)
	require.NoError(t, err)
	var out []*corev1.Pod
	for i := range obj.(*corev1.PodList).Items {
		out = append(out, &obj.(*corev1.PodList).Items[i])
	}
	return out
}

// run is the kubelet and the DaemonSet controller: a container whose
// image changed restarts (ready unless its node is broken); a node left
// without a pod gets one from the current template.
func (c *cluster) run(ctx context.Context, t *testing.T) {
	defer close(c.done)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		have := map[string]bool{}
		for _, p := range c.pods(t) {
			have[p.Spec.NodeName] = true
			if c.kubelet(p) {
				if _, err := c.cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
					t.Logf("kubelet: %v", err)
				}
			}
		}
		for _, n := range nodes {
			if !have[n] {
				c.mu.Lock()
				pod := c.newPod(c.ds.Spec.Template, n, "h2")
				c.mu.Unlock()
				_, _ = c.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			}
		}
	}
}

// kubelet brings the pod's status to its spec; it reports a change.
func (c *cluster) kubelet(p *corev1.Pod) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	byName := map[string]corev1.ContainerStatus{}
	for _, s := range p.Status.ContainerStatuses {
		byName[s.Name] = s
	}
	var statuses []corev1.ContainerStatus
	// A broken node's restarted containers never get ready.
	fresh := !c.broken[p.Spec.NodeName]
	ready := true
	for _, ctr := range p.Spec.Containers {
		s, ok := byName[ctr.Name]
		if !ok || s.Image != ctr.Image {
			c.ids++
			s = corev1.ContainerStatus{Name: ctr.Name, Image: ctr.Image, ContainerID: fmt.Sprintf("containerd://%d", c.ids),
				Ready: fresh, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
			changed = true
		}
		if !s.Ready && fresh {
			s.Ready, changed = true, true // a broken node fixed
		}
		ready = ready && s.Ready
		statuses = append(statuses, s)
	}
	want := corev1.ConditionTrue
	if !ready {
		want = corev1.ConditionFalse
	}
	if !changed && len(p.Status.Conditions) == 1 && p.Status.Conditions[0].Status == want {
		return false
	}
	p.Status.ContainerStatuses = statuses
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: want}}
	return true
}

func (c *cluster) upgrade(t *testing.T) ([]Step, error) {
	t.Helper()
	c.waitAllReady(t)
	return c.upgradeAsItIs(t)
}

// upgradeAsItIs runs the upgrade without waiting for the pods first.
func (c *cluster) upgradeAsItIs(t *testing.T) ([]Step, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := New(c.cs, Config{Namespace: ns, Selector: "causeway.io/conduit",
		ReadyTimeout: 500 * time.Millisecond, PollInterval: 5 * time.Millisecond},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	return u.Run(ctx)
}

// waitAllReady waits until the kubelet has made every pod ready.
func (c *cluster) waitAllReady(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, p := range c.pods(t) {
			if !podReady(p) {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "the kubelet makes the pods ready")
}

// patchDaemonSet applies a JSON merge patch to the DaemonSet.
func (c *cluster) patchDaemonSet(t *testing.T, patch string) {
	t.Helper()
	_, err := c.cs.AppsV1().DaemonSets(ns).Patch(context.Background(), c.ds.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

func (c *cluster) podOn(t *testing.T, node string) *corev1.Pod {
	for _, p := range c.pods(t) {
		if p.Spec.NodeName == node {
			return p
		}
	}
	t.Fatalf("no pod on %s", node)
	return nil
}

func requireSteps(t *testing.T, steps []Step, want ...Action) {
	t.Helper()
	require.Len(t, steps, len(want), "%v", steps)
	for i, s := range steps {
		require.Equal(t, nodes[i], s.Node, "one node after the other, in order: %v", steps)
		require.Equal(t, want[i], s.Action, "%v", s)
	}
}

func TestImageChangeIsMadeInPlace(t *testing.T) {
	c := newCluster(t, template("v2"), nil)
	before := map[string]types.UID{}
	for _, n := range nodes {
		before[n] = c.podOn(t, n).UID
	}
	steps, err := c.upgrade(t)
	require.NoError(t, err)
	requireSteps(t, steps, InPlace, InPlace, InPlace)
	require.Contains(t, steps[0].Reason, "only container images")
	for _, n := range nodes {
		p := c.podOn(t, n)
		require.Equal(t, before[n], p.UID, "%s keeps its pod (and its network namespace)", n)
		require.Equal(t, "causeway/proxy:v2", p.Spec.Containers[0].Image)
		require.Equal(t, "busybox:v2", p.Spec.InitContainers[0].Image)
		require.Equal(t, "h2", p.Labels[hashLabel], "the DaemonSet counts the pod as updated")
		require.Equal(t, "2", p.Labels[generationLabel])
		require.Equal(t, "v2", p.Labels["app.kubernetes.io/version"])
		require.True(t, readyNow(p))
	}
	require.Zero(t, c.maxAway, "no pod was changed while another was not ready")
	require.Equal(t, []string{"patch proxy-a-lb-1", "patch proxy-a-lb-2", "patch proxy-a-lb-3"}, c.actions)
}

func TestOtherChangeReplacesThePod(t *testing.T) {
	next := template("v2")
	next.Spec.Volumes = []corev1.Volume{{Name: "extra", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	next.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NSM_LOG_LEVEL", Value: "TRACE"}}
	c := newCluster(t, next, nil)
	steps, err := c.upgrade(t)
	require.NoError(t, err)
	requireSteps(t, steps, Replaced, Replaced, Replaced)
	require.Contains(t, steps[0].Reason, "spec.volumes")
	require.Contains(t, steps[0].Reason, "spec.containers[proxy].env")
	for _, n := range nodes {
		p := c.podOn(t, n)
		require.NotEqual(t, "h1", p.Labels[hashLabel], "%s has a new pod", n)
		require.Len(t, p.Spec.Volumes, 1)
	}
	require.Zero(t, c.maxAway)
	require.Equal(t, []string{"delete proxy-a-lb-1", "delete proxy-a-lb-2", "delete proxy-a-lb-3"}, c.actions)
}

func TestUpgradedPodsAreSkipped(t *testing.T) {
	// node-1's proxy was upgraded by an earlier run that stopped.
	c := newCluster(t, template("v2"), func(p *corev1.Pod) {
		if p.Spec.NodeName == "node-1" {
			next := template("v2")
			p.Spec = *next.Spec.DeepCopy()
			p.Spec.NodeName = "node-1"
			p.Labels["app.kubernetes.io/version"] = "v2"
			p.Labels[hashLabel] = "h2"
			p.Labels[generationLabel] = "2"
		}
	})
	steps, err := c.upgrade(t)
	require.NoError(t, err)
	requireSteps(t, steps, Skipped, InPlace, InPlace)
	require.Equal(t, []string{"patch proxy-a-lb-2", "patch proxy-a-lb-3"}, c.actions)

	// Run again: nothing left to do.
	steps, err = c.upgrade(t)
	require.NoError(t, err)
	requireSteps(t, steps, Skipped, Skipped, Skipped)
	require.Len(t, c.actions, 2, "a second run changes nothing")
}

func TestNothingToChangeWaitsForNoOne(t *testing.T) {
	// Every proxy on the template already (an upgrade of the VIPs only),
	// node-2's not ready (its node down): the upgrade waits for no one.
	c := newCluster(t, template("v2"), nil)
	_, err := c.upgrade(t)
	require.NoError(t, err)
	c.mu.Lock()
	c.broken["node-2"] = true
	c.mu.Unlock()
	p := c.podOn(t, "node-2")
	p.Status.ContainerStatuses[0].Ready = false
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	_, err = c.cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
	require.NoError(t, err)

	steps, err := c.upgradeAsItIs(t)
	require.NoError(t, err, "nothing to change: node-2's proxy is not waited for")
	requireSteps(t, steps, Skipped, Skipped, Skipped)
	require.False(t, podReady(c.podOn(t, "node-2")), "node-2's proxy stayed not ready throughout")
}

func TestStopsWhenANodeDoesNotComeBackReady(t *testing.T) {
	c := newCluster(t, template("v2"), nil)
	c.waitAllReady(t)
	c.mu.Lock()
	c.broken["node-2"] = true
	c.mu.Unlock()
	steps, err := c.upgrade(t)
	require.Error(t, err)
	require.Contains(t, err.Error(), "node node-2's proxy not ready within")
	require.Contains(t, err.Error(), "not Ready")
	requireSteps(t, steps, InPlace, InPlace) // node-2's patched, never ready
	require.Equal(t, "causeway/proxy:v1", c.podOn(t, "node-3").Spec.Containers[0].Image, "node-3 is left alone")

	// Resumed once node-2 is fixed: node-1 skipped, node-2 waited for,
	// node-3 upgraded.
	c.mu.Lock()
	c.broken["node-2"] = false
	c.mu.Unlock()
	steps, err = c.upgrade(t)
	require.NoError(t, err)
	requireSteps(t, steps, Skipped, Skipped, InPlace)
}

func TestNeverTakesASecondNodeAway(t *testing.T) {
	c := newCluster(t, template("v2"), nil)
	c.waitAllReady(t)
	c.mu.Lock()
	c.broken["node-3"] = true
	c.mu.Unlock()
	// node-3's proxy is not ready (its next container status says so).
	_, err := c.cs.CoreV1().Pods(ns).Patch(context.Background(), c.podOn(t, "node-3").Name, types.StrategicMergePatchType,
		[]byte(`{"status":{"containerStatuses":[{"name":"proxy","image":"stale"}]}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !podReady(c.podOn(t, "node-3")) }, 10*time.Second, time.Millisecond)
	c.mu.Lock()
	c.actions = nil
	c.mu.Unlock()

	u := New(c.cs, Config{Namespace: ns, Selector: "causeway.io/conduit", ReadyTimeout: time.Second, PollInterval: 5 * time.Millisecond},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	steps, err := u.Run(context.Background())
	require.Error(t, err)
	require.Contains(t, err.Error(), "on node node-3 is not ready")
	require.Empty(t, steps)
	require.Empty(t, c.actions, "no pod changed")
}

func TestPause(t *testing.T) {
	c := newCluster(t, template("v2"), nil)
	c.patchDaemonSet(t, `{"metadata":{"annotations":{"`+PauseAnnotation+`":"true"}}}`)
	steps, err := c.upgrade(t)
	require.ErrorIs(t, err, ErrPaused)
	require.Empty(t, steps)
	require.Empty(t, c.actions)
}

func TestRevisionGoneReplaces(t *testing.T) {
	c := newCluster(t, template("v2"), func(p *corev1.Pod) { p.Labels[hashLabel] = "pruned" })
	steps, err := c.upgrade(t)
	require.NoError(t, err)
	requireSteps(t, steps, Replaced, Replaced, Replaced)
	require.True(t, strings.Contains(steps[0].Reason, "no longer kept"), steps[0].Reason)
}

func TestConfigNamesBadVariables(t *testing.T) {
	err := (&Config{Selector: "a in (", ReadyTimeout: 0, PollInterval: time.Second, LogLevel: "LOUD"}).Validate()
	require.Error(t, err)
	for _, v := range []string{"UPGRADE_NAMESPACE", "UPGRADE_SELECTOR", "UPGRADE_READY_TIMEOUT", "UPGRADE_LOG_LEVEL"} {
		require.Contains(t, err.Error(), v)
	}
	err = (&Config{Namespace: ns, Runs: "app=mover", ReadyTimeout: time.Second, PollInterval: time.Second, LogLevel: "INFO"}).Validate()
	require.ErrorContains(t, err, "UPGRADE_POD: empty, but UPGRADE_RUNS is set")
	err = (&Config{Namespace: ns, Runs: "a in (", Pod: "p", ReadyTimeout: time.Second, PollInterval: time.Second, LogLevel: "INFO"}).Validate()
	require.ErrorContains(t, err, "UPGRADE_RUNS")
}
