package nodewatch

import (
	"context"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Engine is what the watcher asks of the IPAM (an ipam.Engine, or the
// leader.Gate, which answers only while its engine serves).
type Engine interface {
	NodeNames() []string
	FreeNode(name string) (freed int, leasedUntil time.Time)
}

// Watcher frees the subnets of deleted nodes. Run it once.
type Watcher struct {
	Client kubernetes.Interface
	Engine Engine
	// Resync is the longest time between two passes (default a minute): a
	// pass also follows each Node deletion and the end of the last lease
	// of a deleted node that was kept.
	Resync time.Duration
	Logger *slog.Logger
}

// Run watches the Nodes until ctx ends; it returns once its informer has
// stopped.
func (w *Watcher) Run(ctx context.Context) {
	if w.Resync <= 0 {
		w.Resync = time.Minute
	}
	factory := informers.NewSharedInformerFactory(w.Client, 0)
	defer factory.Shutdown()
	nodes := factory.Core().V1().Nodes()
	deleted := make(chan struct{}, 1)
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(any) {
			select {
			case deleted <- struct{}{}:
			default:
			}
		},
	}); err != nil {
		w.Logger.Error("cannot watch the cluster's nodes", "error", err)
		return
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		return
	}
	w.Logger.Info("watching the cluster's nodes: a deleted node's subnets are freed once their leases end")
	timer := time.NewTimer(0)
	defer timer.Stop()
	kept := map[string]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-deleted:
		case <-timer.C:
		}
		next := w.pass(nodes.Lister(), kept)
		timer.Reset(next)
	}
}

// pass frees what it can of the nodes the cluster no longer has and
// returns the time until the next pass. A deleted node whose subnets it
// keeps is logged once for each end of lease it finds (kept).
func (w *Watcher) pass(nodes corelisters.NodeLister, kept map[string]time.Time) time.Duration {
	next := w.Resync
	for _, name := range w.Engine.NodeNames() {
		_, err := nodes.Get(name)
		if !apierrors.IsNotFound(err) {
			delete(kept, name)
			continue // in the cluster (or not known to be gone)
		}
		freed, until := w.Engine.FreeNode(name)
		if freed > 0 {
			w.Logger.Info("node deleted from the cluster: its subnets freed", "node", name, "subnets", freed)
		}
		switch {
		case until.IsZero():
			delete(kept, name)
		case !kept[name].Equal(until):
			kept[name] = until
			w.Logger.Info("node deleted from the cluster: its subnets kept until their leases end", "node", name, "until", until.UTC())
		}
		if !until.IsZero() {
			// A little after the end, for the lease to have ended.
			next = min(next, time.Until(until)+10*time.Millisecond)
		}
	}
	return max(next, 0)
}
