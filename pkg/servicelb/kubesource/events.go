package kubesource

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EventComponent is the reporting component of the Events the proxy
// writes.
const EventComponent = "causeway-proxy"

// refusals writes a Warning Event on a Service for each problem the
// source meets with it (an IP or a port it does not serve), once per
// Service, node and problem while the problem lasts: the tracker reports
// a Service's problems when they change, and only the new ones are
// written. The Event's name derives from the Service, the node and the
// problem, so that a proxy restarted finds its Event and refreshes its
// lastTimestamp instead of adding one. Writes run on their own goroutine
// (Run), never in an informer's handler.
type refusals struct {
	client Client
	node   string
	log    *slog.Logger

	mu       sync.Mutex
	reported map[types.UID]map[problem]bool
	queue    []corev1.Event
	kick     chan struct{}
}

func newRefusals(client Client, node string, log *slog.Logger) *refusals {
	return &refusals{client: client, node: node, log: log, reported: map[types.UID]map[problem]bool{}, kick: make(chan struct{}, 1)}
}

// report records svc's current problems and queues an Event for each new one.
func (r *refusals) report(svc *corev1.Service, problems []problem) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := map[problem]bool{}
	for _, p := range problems {
		now[p] = true
		if !r.reported[svc.UID][p] {
			r.queue = append(r.queue, r.event(svc, p))
		}
	}
	if len(now) == 0 {
		delete(r.reported, svc.UID)
	} else {
		r.reported[svc.UID] = now
	}
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// event is the Event of problem p on svc.
func (r *refusals) event(svc *corev1.Service, p problem) corev1.Event {
	now := metav1.Now()
	return corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace,
			Name: fmt.Sprintf("%s.%s", svc.Name, shortHash(string(svc.UID)+"|"+r.node+"|"+p.Reason+"|"+p.Message))},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name,
			UID: svc.UID, ResourceVersion: svc.ResourceVersion},
		Reason: p.Reason, Message: p.Message, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: EventComponent, Host: r.node},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: ManagedBy, ReportingInstance: r.node,
	}
}

// run writes the queued Events until ctx ends.
func (r *refusals) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		}
		r.mu.Lock()
		q := r.queue
		r.queue = nil
		r.mu.Unlock()
		for i := range q {
			if err := r.write(ctx, &q[i]); err != nil && ctx.Err() == nil {
				r.log.Warn("event on a service not written", "service", q[i].InvolvedObject.Namespace+"/"+q[i].InvolvedObject.Name,
					"reason", q[i].Reason, "error", err)
			}
		}
	}
}

// write creates e, or refreshes the Event of that name.
func (r *refusals) write(ctx context.Context, e *corev1.Event) error {
	api := r.client.Events(e.Namespace)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := api.Create(ctx, e, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	patch, err := json.Marshal(map[string]any{"lastTimestamp": e.LastTimestamp, "message": e.Message})
	if err != nil {
		return err
	}
	_, err = api.Patch(ctx, e.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}
