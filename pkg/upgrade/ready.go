package upgrade

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// waitReady waits up to ReadyTimeout for a pod of ds on node that done
// accepts, and returns it. The error names the node and what was last
// seen there.
func (u *Upgrader) waitReady(ctx context.Context, ds *appsv1.DaemonSet, node string, done func(*corev1.Pod) bool) (*corev1.Pod, error) {
	var found *corev1.Pod
	last := "no pod"
	ctx, cancel := context.WithTimeout(ctx, u.cfg.ReadyTimeout)
	defer cancel()
	err := u.poll(ctx, func(ctx context.Context) (bool, error) {
		pods, err := u.pods(ctx, ds)
		if err != nil {
			return false, err
		}
		last = "no pod"
		for _, p := range pods {
			if p.Spec.NodeName != node {
				continue
			}
			last = fmt.Sprintf("pod %s: %s", p.Name, podStatus(p))
			if done(p) {
				found = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("daemonset %s: node %s's proxy not ready within %v (last seen: %s): the upgrade stops here",
				ds.Name, node, u.cfg.ReadyTimeout, last)
		}
		return nil, fmt.Errorf("daemonset %s: waiting for node %s's proxy: %w", ds.Name, node, err)
	}
	return found, nil
}

// poll calls cond every PollInterval until it is done, fails, or ctx ends.
func (u *Upgrader) poll(ctx context.Context, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextCancel(ctx, u.cfg.PollInterval, true, cond)
}

// readyNow reports whether every container of the pod runs ready and the
// pod is Ready.
func readyNow(p *corev1.Pod) bool {
	if !podReady(p) {
		return false
	}
	for _, s := range p.Status.ContainerStatuses {
		if !s.Ready || s.State.Running == nil {
			return false
		}
	}
	return true
}

// podReady reports the pod's Ready condition.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podStatus says briefly why a pod is (not) ready.
func podStatus(p *corev1.Pod) string {
	s := string(p.Status.Phase)
	if podReady(p) {
		s += ", Ready"
	} else {
		s += ", not Ready"
	}
	for _, c := range p.Status.ContainerStatuses {
		switch {
		case c.State.Waiting != nil:
			s += fmt.Sprintf("; %s waiting: %s", c.Name, c.State.Waiting.Reason)
		case c.State.Terminated != nil:
			s += fmt.Sprintf("; %s terminated: %s", c.Name, c.State.Terminated.Reason)
		case !c.Ready:
			s += fmt.Sprintf("; %s running, not ready", c.Name)
		}
	}
	return s
}
