package upgrade

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Step is what the upgrade did to one pod.
type Step struct {
	DaemonSet, Pod, Node string
	Action               Action
	Reason               string
}

func (s Step) String() string {
	return fmt.Sprintf("%s/%s on %s: %s (%s)", s.DaemonSet, s.Pod, s.Node, s.Action, s.Reason)
}

// Upgrader moves the pods of the selected DaemonSets to their templates
// (see the package's contract).
type Upgrader struct {
	cs  kubernetes.Interface
	cfg Config
	log *slog.Logger
}

// New returns an upgrader working through cs; log receives its progress.
func New(cs kubernetes.Interface, cfg Config, log *slog.Logger) *Upgrader {
	return &Upgrader{cs: cs, cfg: cfg, log: log}
}

// Run upgrades every DaemonSet of the namespace that the selector selects,
// in name order, pod by pod, once no other run is under way (Runs), and returns the steps done. On error (a pod
// not ready in time, a pause, an API failure) it stops and returns the
// steps done until then.
func (u *Upgrader) Run(ctx context.Context) ([]Step, error) {
	if err := u.waitAlone(ctx); err != nil {
		return nil, err
	}
	list, err := u.cs.AppsV1().DaemonSets(u.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: u.cfg.Selector})
	if err != nil {
		return nil, fmt.Errorf("list the daemonsets %q of %s: %w", u.cfg.Selector, u.cfg.Namespace, err)
	}
	slices.SortFunc(list.Items, func(a, b appsv1.DaemonSet) int { return strings.Compare(a.Name, b.Name) })
	var steps []Step
	for i := range list.Items {
		ds := &list.Items[i]
		if ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
			u.log.Info("daemonset left to its own update strategy", "daemonset", ds.Name, "strategy", ds.Spec.UpdateStrategy.Type)
			continue
		}
		done, err := u.daemonSet(ctx, ds.Name)
		steps = append(steps, done...)
		if err != nil {
			return steps, err
		}
	}
	return steps, nil
}

// daemonSet upgrades the pods of one DaemonSet, one after the other.
func (u *Upgrader) daemonSet(ctx context.Context, name string) ([]Step, error) {
	ds, err := u.observed(ctx, name)
	if err != nil {
		return nil, err
	}
	revs, err := readRevisions(ctx, u.cs, ds)
	if err != nil {
		return nil, err
	}
	pods, err := u.pods(ctx, ds)
	if err != nil {
		return nil, err
	}
	u.log.Info("upgrading daemonset", "daemonset", ds.Name, "revision", revs.current, "pods", len(pods))
	// With nothing to change, no pod is waited for: a node that is down
	// does not fail an upgrade that leaves its proxies alone.
	wait := !onTemplate(ds, revs, pods)
	var steps []Step
	for _, pod := range pods {
		if err := u.checkPaused(ctx, ds.Name); err != nil {
			return steps, err
		}
		step, err := u.pod(ctx, ds, revs, pod, wait)
		if step.Action != "" {
			steps = append(steps, step)
		}
		if err != nil {
			return steps, err
		}
	}
	return steps, nil
}

// onTemplate reports whether every pod of ds is on its template already.
func onTemplate(ds *appsv1.DaemonSet, revs *revisions, pods []*corev1.Pod) bool {
	for _, pod := range pods {
		if decide(pod, revs.byHash[pod.Labels[hashLabel]], ds, revs.current).action != Skipped {
			return false
		}
	}
	return true
}

// pod brings one pod to the template and waits until it (or the pod that
// replaces it) is ready; a pod on the template already is waited for only
// with wait (when a later pod of its DaemonSet is to change).
func (u *Upgrader) pod(ctx context.Context, ds *appsv1.DaemonSet, revs *revisions, pod *corev1.Pod, wait bool) (Step, error) {
	p := decide(pod, revs.byHash[pod.Labels[hashLabel]], ds, revs.current)
	step := Step{DaemonSet: ds.Name, Pod: pod.Name, Node: pod.Spec.NodeName, Action: p.action, Reason: p.reason}
	if p.action != Skipped {
		if err := u.othersReady(ctx, ds, pod.Name); err != nil {
			return Step{}, err
		}
	}
	u.log.Info("upgrading pod", "daemonset", ds.Name, "pod", pod.Name, "node", pod.Spec.NodeName,
		"action", string(p.action), "reason", p.reason)
	var err error
	switch p.action {
	case Skipped:
		if !wait {
			u.log.Info("pod left as it is, not waited for", "daemonset", ds.Name, "pod", pod.Name,
				"node", pod.Spec.NodeName, "ready", readyNow(pod))
			return step, nil
		}
		_, err = u.waitReady(ctx, ds, pod.Spec.NodeName, readyNow)
	case InPlace:
		err = u.inPlace(ctx, ds, pod, p)
	case Replaced:
		err = u.replace(ctx, ds, pod)
	}
	if err != nil {
		return step, err
	}
	u.log.Info("pod upgraded and ready", "daemonset", ds.Name, "pod", pod.Name, "node", pod.Spec.NodeName, "action", string(p.action))
	return step, nil
}

// observed gets the DaemonSet once its controller has seen its latest
// spec (so that its current revision exists).
func (u *Upgrader) observed(ctx context.Context, name string) (*appsv1.DaemonSet, error) {
	var ds *appsv1.DaemonSet
	err := u.poll(ctx, func(ctx context.Context) (bool, error) {
		var err error
		ds, err = u.cs.AppsV1().DaemonSets(u.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("get daemonset %s: %w", name, err)
		}
		return ds.Status.ObservedGeneration >= ds.Generation, nil
	})
	if err != nil {
		return nil, fmt.Errorf("daemonset %s: its controller has not seen generation %d: %w", name, ds.Generation, err)
	}
	return ds, nil
}

// pods lists the pods ds controls, by node name.
func (u *Upgrader) pods(ctx context.Context, ds *appsv1.DaemonSet) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("daemonset %s: selector: %w", ds.Name, err)
	}
	list, err := u.cs.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("daemonset %s: list its pods: %w", ds.Name, err)
	}
	var out []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if metav1.IsControlledBy(p, ds) && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Spec.NodeName, b.Spec.NodeName) })
	return out, nil
}

// othersReady fails unless every pod of ds but the named one is ready: an
// upgrade never takes a second node's proxy away.
func (u *Upgrader) othersReady(ctx context.Context, ds *appsv1.DaemonSet, except string) error {
	pods, err := u.pods(ctx, ds)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if p.Name != except && !podReady(p) {
			return fmt.Errorf("daemonset %s: pod %s on node %s is not ready: the upgrade stops rather than take a second node's proxy away",
				ds.Name, p.Name, p.Spec.NodeName)
		}
	}
	return nil
}

// checkPaused fails with ErrPaused when the DaemonSet carries
// PauseAnnotation=true.
func (u *Upgrader) checkPaused(ctx context.Context, name string) error {
	ds, err := u.cs.AppsV1().DaemonSets(u.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get daemonset %s: %w", name, err)
	}
	if ds.Annotations[PauseAnnotation] == "true" {
		return fmt.Errorf("daemonset %s (annotation %s=true): %w", name, PauseAnnotation, ErrPaused)
	}
	return nil
}
