// Package upgrade owns the in-place upgrade of the proxy DaemonSets: it
// moves each node's proxy pod to its DaemonSet's template, one pod at a
// time, and waits for it to be ready before the next.
//
// Contract:
//   - In place when it can: when the pod was made from a template that
//     differs from the DaemonSet's only in container images and labels
//     (the fields of a running pod that the API lets change), the pod's
//     images and labels are patched; the kubelet restarts the changed
//     containers in the same pod sandbox, so the pod keeps its network
//     namespace and the kernel keeps forwarding. Anything else (a volume,
//     a capability, an environment variable, an annotation) cannot be made
//     in place: the pod is deleted and the DaemonSet (update strategy
//     OnDelete) makes a new one. Each Step says which it did and why.
//   - One node at a time: a pod is changed only when every other pod of
//     its DaemonSet is ready, and the next only once it is ready again
//     (its changed containers restarted and ready, the pod Ready).
//   - Stops by itself: a pod not ready within Config.ReadyTimeout ends the
//     run with an error naming it and its node; nothing more is changed.
//   - Resumable and idempotent: a pod already equal to the template is
//     skipped (after a wait for it to be ready), so running again after a
//     stop, or a pause, goes on where the last run ended.
//   - Pausable: a DaemonSet annotated PauseAnnotation="true" is left alone
//     from its next pod on; the run ends with ErrPaused.
//   - Alone: a run waits until no other run (Config.Runs, its own pod left
//     out) is pending or running before it changes anything.
//
// Reporter follows a run that a Job does, for the chart's report hook.
//
// The pod's template is read from the DaemonSet's ControllerRevision named
// by the pod's controller-revision-hash label; an in-place change sets that
// label to the current revision, so the DaemonSet counts the pod as
// updated.
package upgrade
