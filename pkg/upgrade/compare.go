package upgrade

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Action is what the upgrade did to a pod.
type Action string

// The actions.
const (
	// Skipped: the pod already equals its DaemonSet's template.
	Skipped Action = "skipped"
	// InPlace: the pod's images (and labels) were patched; the kubelet
	// restarted its changed containers in the same pod.
	InPlace Action = "in place"
	// Replaced: the pod was deleted for the DaemonSet to make a new one.
	Replaced Action = "replaced"
)

// plan is what to do to one pod, and why.
type plan struct {
	action Action
	reason string
	// images are the containers to change (init containers included), by
	// name: the image each gets.
	images map[string]string
	// labels are the labels to set; a nil value removes the label.
	labels map[string]*string
}

// decide compares pod, made from template from (nil when its revision is
// gone), with its DaemonSet's template ds.Spec.Template of revision hash.
func decide(pod *corev1.Pod, from *corev1.PodTemplateSpec, ds *appsv1.DaemonSet, hash string) plan {
	to := &ds.Spec.Template
	if from == nil {
		return plan{action: Replaced, reason: fmt.Sprintf("the revision it was made from (%s=%s) is no longer kept, "+
			"so what differs cannot be told", hashLabel, pod.Labels[hashLabel])}
	}
	if diff := differences(from, to); len(diff) > 0 {
		return plan{action: Replaced, reason: "the template changed beyond container images and labels: " + strings.Join(diff, ", ")}
	}
	p := plan{action: InPlace, images: imageChanges(pod, to), labels: labelChanges(pod, from, to, hash, ds.Generation)}
	switch {
	case len(p.images) == 0 && len(p.labels) == 0:
		return plan{action: Skipped, reason: "it is on the DaemonSet's template already"}
	case len(p.images) == 0:
		p.reason = "only its labels differ (no container restarts)"
	default:
		p.reason = "only container images (and labels) differ: " + strings.Join(slices.Sorted(maps.Keys(p.images)), ", ")
	}
	return p
}

// imageChanges are the containers of pod whose image differs from to's.
func imageChanges(pod *corev1.Pod, to *corev1.PodTemplateSpec) map[string]string {
	have := map[string]string{}
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		have[c.Name] = c.Image
	}
	out := map[string]string{}
	for _, c := range append(slices.Clone(to.Spec.InitContainers), to.Spec.Containers...) {
		if have[c.Name] != c.Image {
			out[c.Name] = c.Image
		}
	}
	return out
}

// labelChanges are the labels that make pod's equal to to's (and name the
// current revision): those of to that it lacks or has otherwise, and the
// removal of those that from put and to no longer has. Labels put by
// others are left alone.
func labelChanges(pod *corev1.Pod, from, to *corev1.PodTemplateSpec, hash string, generation int64) map[string]*string {
	want := maps.Clone(to.Labels)
	if want == nil {
		want = map[string]string{}
	}
	want[hashLabel] = hash
	if _, ok := pod.Labels[generationLabel]; ok {
		want[generationLabel] = strconv.FormatInt(generation, 10)
	}
	out := map[string]*string{}
	for k, v := range want {
		if have, ok := pod.Labels[k]; !ok || have != v {
			out[k] = &v
		}
	}
	for k := range from.Labels {
		if _, kept := want[k]; !kept {
			if _, ok := pod.Labels[k]; ok {
				out[k] = nil
			}
		}
	}
	return out
}

// differences names the fields in which two templates differ other than
// container images and labels: the changes a running pod cannot take.
func differences(a, b *corev1.PodTemplateSpec) []string {
	a, b = mutableCleared(a), mutableCleared(b)
	var out []string
	if !reflect.DeepEqual(asMap(a.ObjectMeta), asMap(b.ObjectMeta)) {
		out = append(out, mapDiff("metadata", asMap(a.ObjectMeta), asMap(b.ObjectMeta))...)
	}
	am, bm := asMap(a.Spec), asMap(b.Spec)
	for _, list := range []string{"initContainers", "containers"} {
		out = append(out, containerDiff("spec."+list, am[list], bm[list])...)
		delete(am, list)
		delete(bm, list)
	}
	return append(out, mapDiff("spec", am, bm)...)
}

// mutableCleared is a copy of t without what a running pod can change.
func mutableCleared(t *corev1.PodTemplateSpec) *corev1.PodTemplateSpec {
	t = t.DeepCopy()
	t.Labels = nil
	for i := range t.Spec.Containers {
		t.Spec.Containers[i].Image = ""
	}
	for i := range t.Spec.InitContainers {
		t.Spec.InitContainers[i].Image = ""
	}
	return t
}

// containerDiff names the containers of two lists that differ: added,
// removed, or the fields that changed.
func containerDiff(path string, a, b any) []string {
	byName := func(v any) map[string]map[string]any {
		out := map[string]map[string]any{}
		list, _ := v.([]any)
		for _, c := range list {
			if m, ok := c.(map[string]any); ok {
				name, _ := m["name"].(string)
				out[name] = m
			}
		}
		return out
	}
	am, bm := byName(a), byName(b)
	var out []string
	for _, name := range slices.Sorted(maps.Keys(union(am, bm))) {
		ca, inA := am[name]
		cb, inB := bm[name]
		switch {
		case !inA:
			out = append(out, fmt.Sprintf("%s: %s added", path, name))
		case !inB:
			out = append(out, fmt.Sprintf("%s: %s removed", path, name))
		default:
			out = append(out, mapDiff(fmt.Sprintf("%s[%s]", path, name), ca, cb)...)
		}
	}
	return out
}

// mapDiff names the keys whose values differ between two objects.
func mapDiff(path string, a, b map[string]any) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(union(a, b))) {
		if !reflect.DeepEqual(a[k], b[k]) {
			out = append(out, path+"."+k)
		}
	}
	return out
}

func union[V any](a, b map[string]V) map[string]V {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]V{}
	}
	maps.Copy(out, b)
	return out
}

// asMap is v as JSON sees it (empty fields left out).
func asMap(v any) map[string]any {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("upgrade: marshal %T: %v", v, err)) // API types always marshal
	}
	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(fmt.Sprintf("upgrade: unmarshal %T: %v", v, err))
	}
	return out
}
