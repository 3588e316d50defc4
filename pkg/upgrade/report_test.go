package upgrade

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// upgradeJob is an upgrade Job with one pod in phase, ended by cond
// ("" while it runs).
func upgradeJob(phase corev1.PodPhase, cond batchv1.JobConditionType) (*batchv1.Job, *corev1.Pod) {
	yes := true
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "proxy-mover-a-3", Namespace: ns, UID: "job-uid"}}
	if cond != "" {
		job.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "proxy-mover-a-3-x7k", Namespace: ns, Labels: map[string]string{jobNameLabel: job.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: &yes}}},
		Status: corev1.PodStatus{Phase: phase},
	}
	return job, pod
}

func reporter(cs *fake.Clientset) *Reporter {
	return NewReporter(cs, Config{Namespace: ns, Report: "proxy-mover-a-3", PollInterval: time.Millisecond},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// TestReportCopiesTheLogAndTheVerdict: the report copies the upgrade
// pod's log and ends as the Job ended.
func TestReportCopiesTheLogAndTheVerdict(t *testing.T) {
	job, pod := upgradeJob(corev1.PodSucceeded, batchv1.JobComplete)
	var out strings.Builder
	require.NoError(t, reporter(fake.NewClientset(job, pod)).Run(context.Background(), &out))
	require.Equal(t, "fake logs", out.String(), "the fake API server's log of the pod")

	job, pod = upgradeJob(corev1.PodFailed, batchv1.JobFailed)
	out.Reset()
	err := reporter(fake.NewClientset(job, pod)).Run(context.Background(), &out)
	require.ErrorContains(t, err, "the upgrade job proxy-mover-a-3 failed (BackoffLimitExceeded")
	require.Equal(t, "fake logs", out.String())

	_, err = reporter(fake.NewClientset()).started(context.Background())
	require.ErrorContains(t, err, "get the upgrade job proxy-mover-a-3")
	require.True(t, apierrors.IsNotFound(err), "%v", err)

	// A read that fails for a while (the API server away) is tried again.
	job, pod = upgradeJob(corev1.PodSucceeded, batchv1.JobComplete)
	cs := fake.NewClientset(job, pod)
	fails := 3
	cs.PrependReactor("get", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fails == 0 {
			return false, nil, nil
		}
		fails--
		return true, nil, apierrors.NewServiceUnavailable("etcd away")
	})
	require.NoError(t, reporter(cs).Run(context.Background(), io.Discard))
	require.Zero(t, fails)
}

// TestReportWaitsForTheRun: a pod still pending is not read, and the
// report waits for the Job to end.
func TestReportWaitsForTheRun(t *testing.T) {
	job, pod := upgradeJob(corev1.PodPending, "")
	cs := fake.NewClientset(job, pod)
	done := make(chan error, 1)
	var out strings.Builder
	go func() { done <- reporter(cs).Run(context.Background(), &out) }()
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the report ended while the Job ran: %v", err)
	default:
	}
	pod.Status.Phase = corev1.PodSucceeded
	_, err := cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	_, err = cs.BatchV1().Jobs(ns).UpdateStatus(context.Background(), job, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.Equal(t, "fake logs", out.String())
}

// TestWaitsForAnotherRun: a run starts only once no other run's pod is
// pending or running (or there), and gives up, changing nothing, when one
// runs on.
func TestWaitsForAnotherRun(t *testing.T) {
	c := newCluster(t, template("v2"), nil)
	runs := map[string]string{"app.kubernetes.io/component": "proxy-mover"}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "proxy-mover-a-2-abc", Namespace: ns, Labels: runs},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	self := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "proxy-mover-a-3-def", Namespace: ns, Labels: runs},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, p := range []*corev1.Pod{other, self} {
		_, err := c.cs.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	cfg := Config{Namespace: ns, Selector: "causeway.io/conduit", Runs: "app.kubernetes.io/component=proxy-mover", Pod: self.Name,
		ReadyTimeout: 50 * time.Millisecond, PollInterval: time.Millisecond}
	u := New(c.cs, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	steps, err := u.Run(context.Background())
	require.ErrorContains(t, err, "another upgrade run still runs after 50ms (proxy-mover-a-2-abc)")
	require.Empty(t, steps)
	require.Empty(t, c.actions, "no pod changed")

	// The other run's Job deleted, its pod goes. (Not its status: the fake
	// kubelet rewrites every pod's.)
	require.NoError(t, c.cs.CoreV1().Pods(ns).Delete(context.Background(), other.Name, metav1.DeleteOptions{}))
	u.cfg.ReadyTimeout = 10 * time.Second
	c.waitAllReady(t)
	steps, err = u.Run(context.Background())
	require.NoError(t, err)
	requireSteps(t, steps, InPlace, InPlace, InPlace)
}
