package upgrade

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// waitAlone waits up to ReadyTimeout until no pod that Runs selects, this
// run's own (Pod) left out, is pending or running: a run that an earlier
// release left behind (its Job being deleted, its pod ending) could
// otherwise take a second node's proxy away at the same time.
func (u *Upgrader) waitAlone(ctx context.Context) error {
	if u.cfg.Runs == "" {
		return nil
	}
	var others []string
	var said string
	ctx, cancel := context.WithTimeout(ctx, u.cfg.ReadyTimeout)
	defer cancel()
	err := u.poll(ctx, func(ctx context.Context) (bool, error) {
		list, err := u.cs.CoreV1().Pods(u.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: u.cfg.Runs})
		if err != nil {
			return false, fmt.Errorf("list the upgrade runs %q: %w", u.cfg.Runs, err)
		}
		others = others[:0]
		for _, p := range list.Items {
			if p.Name != u.cfg.Pod && (p.Status.Phase == corev1.PodPending || p.Status.Phase == corev1.PodRunning) {
				others = append(others, p.Name)
			}
		}
		if now := strings.Join(others, ", "); now != "" && now != said {
			u.log.Info("waiting for another upgrade run to end", "pods", now)
			said = now
		}
		return len(others) == 0, nil
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("another upgrade run still runs after %v (%s): this one changes nothing", u.cfg.ReadyTimeout, strings.Join(others, ", "))
	}
	return err
}
