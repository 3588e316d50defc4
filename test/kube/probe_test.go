package kube_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// probePod says how to run the probe image (test/kube/images/probe).
type probePod struct {
	namespace      string // default: "default"
	serviceAccount string // default: the namespace's default
	args           []string
	hostPaths      map[string]string // host directory -> mount path
	claims         map[string]string // claim name -> mount path
	user           int64             // with fsGroup the same; default: the image's
	labels         map[string]string // of the pod
	created        *string           // if not nil, set to the pod's name once created
	node           string            // the node to run on; default: the scheduler's choice
}

// runProbe runs the probe as a pod to its end and returns its output; the
// error says whether it failed. The pod is deleted when t ends.
func (c *cluster) runProbe(ctx context.Context, t *testing.T, p probePod) (string, error) {
	t.Helper()
	if p.namespace == "" {
		p.namespace = "default"
	}
	pods := c.client.CoreV1().Pods(p.namespace)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Labels: p.labels},
		Spec: corev1.PodSpec{
			RestartPolicy:      corev1.RestartPolicyNever,
			ServiceAccountName: p.serviceAccount,
			NodeName:           p.node,
			Containers: []corev1.Container{{
				Name: "probe", Image: c.image(ctx, t, "probe"), ImagePullPolicy: corev1.PullNever,
				Args: p.args,
			}},
		},
	}
	for host, path := range p.hostPaths {
		name := fmt.Sprintf("host%d", len(pod.Spec.Volumes))
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: host},
		}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: name, MountPath: path, ReadOnly: true})
	}
	for claim, path := range p.claims {
		name := fmt.Sprintf("claim%d", len(pod.Spec.Volumes))
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
		}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: name, MountPath: path})
	}
	if p.user != 0 {
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &p.user, RunAsGroup: &p.user, FSGroup: &p.user}
	}
	pod, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pods.Delete(context.Background(), pod.Name, metav1.DeleteOptions{}) })
	if p.created != nil {
		*p.created = pod.Name
	}
	var phase corev1.PodPhase
	eventually(ctx, t, "the probe pod done", func(ctx context.Context) error {
		got, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		phase = got.Status.Phase
		if phase != corev1.PodSucceeded && phase != corev1.PodFailed {
			return fmt.Errorf("phase %s", phase)
		}
		return nil
	})
	out := c.logs(ctx, pod)
	if phase == corev1.PodFailed {
		return out, errors.New("the probe failed")
	}
	return out, nil
}
