package kubesource

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// serviceInformer caches the Services of the proxy name only (the label
// selector is on the list and the watch).
func (s *Source) serviceInformer() cache.SharedIndexInformer {
	api := s.client.Services(metav1.NamespaceAll)
	lw := s.listWatch(serviceSelector(s.name).String(),
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return api.List(ctx, o) },
		api.Watch)
	return s.newInformer(lw, &corev1.Service{})
}

// sliceInformer caches the slices of the proxy name that this node's
// proxy publishes: its own targets, the only endpoints it has a path to.
func (s *Source) sliceInformer() cache.SharedIndexInformer {
	api := s.client.EndpointSlices(metav1.NamespaceAll)
	lw := s.listWatch(ownSliceSelector(s.name, s.node).String(),
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return api.List(ctx, o) },
		api.Watch)
	return s.newInformer(lw, &discoveryv1.EndpointSlice{})
}

type (
	listFunc  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error)
)

// listWatch lists and watches with the label selector sel, and reports
// the result of every call to the outage tracker.
func (s *Source) listWatch(sel string, list listFunc, watchFn watchFunc) cache.ListerWatcher {
	return observedListWatch(s.outage, func(o *metav1.ListOptions) { o.LabelSelector = sel }, list, watchFn)
}

// observedListWatch lists and watches with the options that restrict
// sets, and reports the result of every call to out.
func observedListWatch(out *outage, restrict func(*metav1.ListOptions), list listFunc, watchFn watchFunc) cache.ListerWatcher {
	return listThenWatch{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			restrict(&o)
			l, err := list(ctx, o)
			out.observe(err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			restrict(&o)
			w, err := watchFn(ctx, o)
			out.observe(err)
			return w, err
		},
	}}
}

// listThenWatch makes the reflector list, then watch from the list's
// resource version. Since client-go v0.35 it would otherwise open a watch
// that streams the initial state (WatchListClient); the source's outage
// tracking takes a list that succeeds as the truth (doc.go), and the fake
// clientset of its tests streams no initial state.
type listThenWatch struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported tells client-go's reflector to list.
func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// newInformer returns an informer without periodic resync whose watch
// errors are not logged by client-go (the outage tracker speaks for them).
func (s *Source) newInformer(lw cache.ListerWatcher, example runtime.Object) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformerWithOptions(lw, example, cache.SharedIndexInformerOptions{})
	_ = inf.SetWatchErrorHandlerWithContext(func(context.Context, *cache.Reflector, error) {})
	return inf
}

// serviceHandler records each Service event in the tracker; a Service that
// does not carry the label (a watch that does not filter, a label removed)
// counts as deleted.
func (s *Source) serviceHandler() cache.ResourceEventHandler {
	sel := serviceSelector(s.name)
	set := func(obj any) {
		svc, ok := obj.(*corev1.Service)
		if !ok {
			return
		}
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		if !sel.Matches(labels.Set(svc.Labels)) {
			svc = nil
		}
		s.tracker.setService(key, svc)
		s.request()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { set(obj) },
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if svc, ok := unwrap(obj).(*corev1.Service); ok {
				s.tracker.setService(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, nil)
				s.request()
			}
		},
	}
}

// sliceHandler records each slice event under its Service, with the
// trigger time of a write made since the source started; a slice that is
// not this node's (a watch that does not filter, a label changed) counts
// as deleted.
func (s *Source) sliceHandler(started time.Time) cache.ResourceEventHandler {
	sel := ownSliceSelector(s.name, s.node)
	set := func(old, obj any, deleted bool) {
		sl, ok := unwrap(obj).(*discoveryv1.EndpointSlice)
		if !ok || sl.Labels[ServiceNameLabel] == "" {
			return
		}
		key := types.NamespacedName{Namespace: sl.Namespace, Name: sl.Labels[ServiceNameLabel]}
		var trigger time.Time
		if !deleted {
			trigger = newTrigger(old, sl, started)
		}
		if deleted || !sel.Matches(labels.Set(sl.Labels)) {
			sl = nil
		}
		s.tracker.setSlice(key, sliceName(obj), sl, trigger)
		s.request()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { set(nil, obj, false) },
		UpdateFunc: func(old, obj any) { set(old, obj, false) },
		DeleteFunc: func(obj any) { set(nil, obj, true) },
	}
}

// newTrigger is the trigger time that sl carries when it is news: a
// value that old (nil: added) did not carry, after started (a relist
// brings back slices written long ago). Zero otherwise.
func newTrigger(old any, sl *discoveryv1.EndpointSlice, started time.Time) time.Time {
	v := sl.Annotations[TriggerTimeAnnotation]
	if v == "" {
		return time.Time{}
	}
	if o, ok := old.(*discoveryv1.EndpointSlice); ok && o.Annotations[TriggerTimeAnnotation] == v {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || t.Before(started) {
		return time.Time{}
	}
	return t
}

// unwrap returns the last known object of a tombstone.
func unwrap(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func sliceName(obj any) string {
	if sl, ok := unwrap(obj).(*discoveryv1.EndpointSlice); ok {
		return sl.Name
	}
	return ""
}
