package upgrade

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// jobNameLabel is the label the Job controller puts on a Job's pods.
const jobNameLabel = batchv1.JobNameLabel

// Reporter follows an upgrade run that a Job does: the chart runs the
// upgrade as a Job of the release (so that Helm's own wait sees the
// DaemonSets it updates) and reports on it from a post-upgrade hook, whose
// log Helm prints and whose failure fails the helm command.
type Reporter struct {
	cs  kubernetes.Interface
	cfg Config
	log *slog.Logger
}

// NewReporter returns a reporter on the Job cfg.Report names.
func NewReporter(cs kubernetes.Interface, cfg Config, log *slog.Logger) *Reporter {
	return &Reporter{cs: cs, cfg: cfg, log: log}
}

// Run copies the log of the Job's pod to w as it comes and returns once
// the Job has ended: nil when it completed, an error with its reason when
// it failed. It waits as long as ctx lets it (the hook's: helm's
// --timeout).
func (r *Reporter) Run(ctx context.Context, w io.Writer) error {
	pod, err := r.started(ctx)
	if err != nil {
		return err
	}
	if pod != "" {
		if err := r.copyLog(ctx, pod, w); err != nil {
			r.log.Warn("the upgrade's log was cut; its end is in the Job's pod", "job", r.cfg.Report, "pod", pod, "error", err)
		}
	}
	return r.ended(ctx)
}

// started waits until the Job's pod has started (its log can be read) and
// returns its name, or "" when the Job ended without one.
func (r *Reporter) started(ctx context.Context) (string, error) {
	var name string
	err := wait.PollUntilContextCancel(ctx, r.cfg.PollInterval, true, func(ctx context.Context) (bool, error) {
		job, err := r.job(ctx)
		if job == nil {
			return false, err
		}
		list, err := r.cs.CoreV1().Pods(r.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: jobNameLabel + "=" + job.Name})
		if err != nil {
			return false, r.transient(err, "list the pods of job %s", job.Name)
		}
		for _, p := range list.Items {
			if metav1.IsControlledBy(&p, job) && p.Status.Phase != corev1.PodPending {
				name = p.Name
				return true, nil
			}
		}
		ended, _ := jobEnd(job)
		return ended, nil
	})
	return name, err
}

// copyLog copies the pod's log to w until its container ends.
func (r *Reporter) copyLog(ctx context.Context, pod string, w io.Writer) error {
	rc, err := r.cs.CoreV1().Pods(r.cfg.Namespace).GetLogs(pod, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	if err != nil {
		return fmt.Errorf("read the log of pod %s: %w", pod, err)
	}
	defer rc.Close()
	_, err = io.Copy(w, rc)
	return err
}

// ended waits for the Job's end and returns its verdict.
func (r *Reporter) ended(ctx context.Context) error {
	var verdict error
	err := wait.PollUntilContextCancel(ctx, r.cfg.PollInterval, true, func(ctx context.Context) (bool, error) {
		job, err := r.job(ctx)
		if job == nil {
			return false, err
		}
		var ended bool
		ended, verdict = jobEnd(job)
		return ended, nil
	})
	if err != nil {
		return err
	}
	return verdict
}

// job reads the Job. Nil without an error: the read failed for a reason
// that may pass, and the caller polls again (transient).
func (r *Reporter) job(ctx context.Context) (*batchv1.Job, error) {
	job, err := r.cs.BatchV1().Jobs(r.cfg.Namespace).Get(ctx, r.cfg.Report, metav1.GetOptions{})
	if err != nil {
		return nil, r.transient(err, "get the upgrade job %s", r.cfg.Report)
	}
	return job, nil
}

// transient returns the error of a failed read when waiting cannot mend
// it (the object gone, the account not allowed); any other failure (the
// API server away a moment) is logged and nil is returned, so that the
// report goes on polling.
func (r *Reporter) transient(err error, format string, args ...any) error {
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return fmt.Errorf(format+": %w", append(args, err)...)
	}
	r.log.Warn("a read failed; trying again", "what", fmt.Sprintf(format, args...), "error", err)
	return nil
}

// jobEnd reports whether the Job has ended and, if it failed, why.
func jobEnd(job *batchv1.Job) (bool, error) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, nil
		case batchv1.JobFailed:
			return true, fmt.Errorf("the upgrade job %s failed (%s: %s): its log above says where it stopped; the same helm upgrade run again resumes it", job.Name, c.Reason, c.Message)
		}
	}
	return false, nil
}
