package upgrade

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// inPlace patches the pod's images and labels and waits until the kubelet
// has restarted the changed containers and the pod is ready.
func (u *Upgrader) inPlace(ctx context.Context, ds *appsv1.DaemonSet, pod *corev1.Pod, p plan) error {
	before := containerIDs(pod)
	patch, err := podPatch(pod, p)
	if err != nil {
		return err
	}
	if _, err := u.cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch pod %s on node %s: %w", pod.Name, pod.Spec.NodeName, err)
	}
	restarted := func(q *corev1.Pod) bool {
		if q.UID != pod.UID {
			return false // a new pod: not this change's
		}
		now := containerIDs(q)
		for name := range p.images {
			// An init container's change waits for the next sandbox.
			if old, regular := before[name]; regular && (now[name] == "" || now[name] == old) {
				return false
			}
		}
		return readyNow(q)
	}
	_, err = u.waitReady(ctx, ds, pod.Spec.NodeName, restarted)
	return err
}

// replace deletes the pod and waits until the DaemonSet's new pod on the
// same node is ready.
func (u *Upgrader) replace(ctx context.Context, ds *appsv1.DaemonSet, pod *corev1.Pod) error {
	uid := pod.UID
	err := u.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil {
		return fmt.Errorf("delete pod %s on node %s: %w", pod.Name, pod.Spec.NodeName, err)
	}
	_, err = u.waitReady(ctx, ds, pod.Spec.NodeName, func(q *corev1.Pod) bool { return q.UID != uid && readyNow(q) })
	return err
}

// podPatch is the strategic merge patch of plan p: container images by
// name, labels set or removed.
func podPatch(pod *corev1.Pod, p plan) ([]byte, error) {
	type container struct {
		Name  string `json:"name"`
		Image string `json:"image"`
	}
	var regular, initial []container
	for _, c := range pod.Spec.Containers {
		if img, ok := p.images[c.Name]; ok {
			regular = append(regular, container{c.Name, img})
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if img, ok := p.images[c.Name]; ok {
			initial = append(initial, container{c.Name, img})
		}
	}
	spec := map[string]any{}
	if len(regular) > 0 {
		spec["containers"] = regular
	}
	if len(initial) > 0 {
		spec["initContainers"] = initial
	}
	body := map[string]any{"metadata": map[string]any{"labels": p.labels, "uid": pod.UID}}
	if len(spec) > 0 {
		body["spec"] = spec
	}
	out, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("patch of pod %s: %w", pod.Name, err)
	}
	return out, nil
}

// containerIDs are the ids of the pod's running containers, by name.
func containerIDs(pod *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, s := range pod.Status.ContainerStatuses {
		out[s.Name] = s.ContainerID
	}
	return out
}
