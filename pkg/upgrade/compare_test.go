package upgrade

import (
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDecide: what the upgrade does to a pod for each kind of change an
// operator's helm upgrade makes to the proxy's template, and the reason it
// gives. Only container images and labels are made in place; anything
// else replaces the pod and is named.
func TestDecide(t *testing.T) {
	const spiffeLabel = "spiffe.io/spiffe-id"
	from := template("v1")
	from.Labels[spiffeLabel] = "true"
	for _, tc := range []struct {
		name   string
		change func(to *corev1.PodTemplateSpec)
		action Action
		reason []string // each in the reason
		images map[string]string
		labels map[string]*string
	}{{
		name:   "nothing",
		change: func(*corev1.PodTemplateSpec) {},
		action: Skipped,
		reason: []string{"on the DaemonSet's template already"},
	}, {
		name: "a new image tag (helm upgrade --set images.proxy.tag)",
		change: func(to *corev1.PodTemplateSpec) {
			to.Spec.Containers[0].Image = "causeway/proxy:v2"
		},
		action: InPlace,
		reason: []string{"only container images", "proxy"},
		images: map[string]string{"proxy": "causeway/proxy:v2"},
		labels: map[string]*string{hashLabel: ptr("h2"), generationLabel: ptr("2")},
	}, {
		name: "an init container's image only",
		change: func(to *corev1.PodTemplateSpec) {
			to.Spec.InitContainers[0].Image = "busybox:v2"
		},
		action: InPlace,
		reason: []string{"only container images", "sysctl-init"},
		images: map[string]string{"sysctl-init": "busybox:v2"},
		labels: map[string]*string{hashLabel: ptr("h2"), generationLabel: ptr("2")},
	}, {
		name: "a label removed (spire.podLabels: the chart's SPIFFE label set to null)",
		change: func(to *corev1.PodTemplateSpec) {
			delete(to.Labels, spiffeLabel)
			to.Labels["team"] = "red"
		},
		action: InPlace,
		reason: []string{"only its labels differ (no container restarts)"},
		labels: map[string]*string{spiffeLabel: nil, "team": ptr("red"), hashLabel: ptr("h2"), generationLabel: ptr("2")},
	}, {
		name: "a memory limit (proxy.resources)",
		change: func(to *corev1.PodTemplateSpec) {
			to.Spec.Containers[0].Image = "causeway/proxy:v2"
			to.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("160Mi")}
		},
		action: Replaced,
		reason: []string{"beyond container images and labels", "spec.containers[proxy].resources"},
	}, {
		name: "a capability",
		change: func(to *corev1.PodTemplateSpec) {
			to.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
				Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_RAW"}}}
		},
		action: Replaced,
		reason: []string{"spec.containers[proxy].securityContext"},
	}, {
		name: "an environment variable (services.source)",
		change: func(to *corev1.PodTemplateSpec) {
			to.Spec.Containers[0].Env = append(to.Spec.Containers[0].Env, corev1.EnvVar{Name: "NSM_SERVICES_SOURCE", Value: "kubernetes"})
		},
		action: Replaced,
		reason: []string{"spec.containers[proxy].env"},
	}, {
		name: "a volume and its mount",
		change: func(to *corev1.PodTemplateSpec) {
			to.Spec.Volumes = append(to.Spec.Volumes, corev1.Volume{Name: "services",
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			to.Spec.Containers[0].VolumeMounts = append(to.Spec.Containers[0].VolumeMounts,
				corev1.VolumeMount{Name: "services", MountPath: "/etc/causeway/services"})
		},
		action: Replaced,
		reason: []string{"spec.containers[proxy].volumeMounts", "spec.volumes"},
	}, {
		name: "an annotation",
		change: func(to *corev1.PodTemplateSpec) {
			to.Annotations = map[string]string{"example.com/note": "x"}
		},
		action: Replaced,
		reason: []string{"metadata.annotations"},
	}, {
		name: "a container added",
		change: func(to *corev1.PodTemplateSpec) {
			to.Spec.Containers = append(to.Spec.Containers, corev1.Container{Name: "sidecar", Image: "sidecar:v1"})
		},
		action: Replaced,
		reason: []string{"spec.containers: sidecar added"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			to := from.DeepCopy()
			tc.change(to)
			// The DaemonSet's revision: the pod's own when nothing changed.
			hash, generation := "h2", int64(2)
			if tc.action == Skipped {
				hash, generation = "h1", 1
			}
			pod := podFrom(&from, "h1")
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Generation: generation}, Spec: appsv1.DaemonSetSpec{Template: *to}}
			p := decide(pod, &from, ds, hash)
			require.Equal(t, tc.action, p.action, p.reason)
			for _, r := range tc.reason {
				require.Contains(t, p.reason, r)
			}
			if tc.action == InPlace {
				require.Equal(t, tc.images, nonNil(p.images))
				require.Equal(t, tc.labels, p.labels)
			}
		})
	}
}

// TestLabelsOfOthersAreLeftAlone: a label that neither template has (put
// on the pod by someone else) is neither set nor removed.
func TestLabelsOfOthersAreLeftAlone(t *testing.T) {
	from := template("v1")
	pod := podFrom(&from, "h1")
	pod.Labels["operator.example.com/seen"] = "yes"
	to := template("v2")
	p := decide(pod, &from, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.DaemonSetSpec{Template: to}}, "h2")
	require.Equal(t, InPlace, p.action)
	require.NotContains(t, p.labels, "operator.example.com/seen")
	require.Equal(t, ptr("v2"), p.labels["app.kubernetes.io/version"])
}

// TestOtherStrategiesAreLeftAlone: a DaemonSet that Kubernetes updates
// (RollingUpdate) is not the upgrade's: none of its pods is touched.
func TestOtherStrategiesAreLeftAlone(t *testing.T) {
	c := newCluster(t, template("v2"), nil)
	c.patchDaemonSet(t, `{"spec":{"updateStrategy":{"type":"RollingUpdate"}}}`)
	steps, err := c.upgrade(t)
	require.NoError(t, err)
	require.Empty(t, steps)
	require.Empty(t, c.actions)
}

// TestLabelChangeIsMadeInPlace: a template whose labels alone changed is
// taken by every pod without a container restart (the same container
// ids), one node after the other.
func TestLabelChangeIsMadeInPlace(t *testing.T) {
	next := template("v1")
	delete(next.Labels, "app.kubernetes.io/version")
	next.Labels["team"] = "red"
	c := newCluster(t, next, nil)
	c.waitAllReady(t)
	before := map[string]string{}
	for _, n := range nodes {
		before[n] = containerIDs(c.podOn(t, n))["proxy"]
	}
	steps, err := c.upgrade(t)
	require.NoError(t, err)
	requireSteps(t, steps, InPlace, InPlace, InPlace)
	require.Contains(t, steps[0].Reason, "only its labels differ")
	for _, n := range nodes {
		p := c.podOn(t, n)
		require.Equal(t, before[n], containerIDs(p)["proxy"], "%s: its proxy not restarted", n)
		require.NotContains(t, p.Labels, "app.kubernetes.io/version")
		require.Equal(t, "red", p.Labels["team"])
		require.Equal(t, "h2", p.Labels[hashLabel])
	}
	require.Zero(t, c.maxAway)
}

// podFrom is a pod of revision hash made from t.
func podFrom(t *corev1.PodTemplateSpec, hash string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "proxy-a-lb-1", Labels: map[string]string{hashLabel: hash, generationLabel: "1"}},
		Spec: *t.Spec.DeepCopy()}
	for k, v := range t.Labels {
		pod.Labels[k] = v
	}
	return pod
}

func nonNil(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

func ptr(s string) *string { return &s }
