package kubesource

import (
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/causeway-net/causeway/internal/limits"
	"github.com/causeway-net/causeway/pkg/servicelb"
)

// entry is one Service's part of the model: its object, its slices, and
// what they make (kept, so that assembling the lists recomputes nothing).
type entry struct {
	svc       *corev1.Service // nil: slices came before (or outlive) it
	slices    map[string]*discoveryv1.EndpointSlice
	parts     []familyPart
	endpoints []servicelb.Endpoints
	problems  []problem
	// svcSlots and epSlots are where the parts' services and endpoints
	// sit in the tracker's lists.
	svcSlots, epSlots []int
}

// tracker holds the entries and whether services or endpoints changed
// since the last snapshot. Its methods are safe for concurrent use.
type tracker struct {
	log      *slog.Logger
	prefixes []netip.Prefix
	refused  func(svc *corev1.Service, problems []problem) // called on a change of a Service's problems
	filter   *endpointFilter
	// maxServices bounds the Services served (0: no bound); a new one
	// past it is not served until a later change of it finds room, and
	// the refusal goes to refusals.
	maxServices int
	refusals    *limits.Refusals
	// namespaces, when not empty, are the only namespaces whose Services
	// and slices are read (the others are ignored).
	namespaces map[string]bool

	mu       sync.Mutex
	entries  map[types.NamespacedName]*entry
	svcDirty bool
	epDirty  bool
	triggers []time.Time // of the slice changes since the last snapshot
	served   int         // entries with a Service
	svcs     flatList[servicelb.Service]
	eps      flatList[servicelb.Endpoints]
}

func newTracker(log *slog.Logger, prefixes []netip.Prefix, refused func(*corev1.Service, []problem), filter *endpointFilter) *tracker {
	return &tracker{log: log, prefixes: prefixes, refused: refused, filter: filter, entries: map[types.NamespacedName]*entry{}}
}

// setService records svc under key (nil: deleted) and recomputes that
// Service's parts and endpoints.
func (t *tracker) setService(key types.NamespacedName, svc *corev1.Service) {
	if !t.inNamespaces(key.Namespace) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(key)
	old := e.svc
	if old == nil && svc != nil && t.maxServices > 0 && t.served >= t.maxServices {
		t.refusals.Refuse("services_per_conduit", t.maxServices, key.String())
		if len(e.slices) == 0 {
			delete(t.entries, key)
		}
		return
	}
	switch {
	case old == nil && svc != nil:
		t.served++
	case old != nil && svc == nil:
		t.served--
	}
	e.svc = svc
	var problems []problem
	if svc != nil {
		e.parts, problems = toModel(svc, t.prefixes)
	} else {
		e.parts = nil
	}
	if !slices.Equal(problems, e.problems) {
		if len(problems) > 0 {
			t.log.Warn("service partly not served", "service", key.String(), "problems", problems)
		}
		if svc != nil {
			t.refused(svc, problems)
		} else if old != nil {
			t.refused(old, nil) // forgotten: reported again if it comes back
		}
	}
	e.problems = problems
	svcs := make([]servicelb.Service, 0, len(e.parts))
	for _, p := range e.parts {
		svcs = append(svcs, p.service)
	}
	t.svcs.replace(&e.svcSlots, svcs)
	t.svcDirty = true
	t.recompute(key, e)
}

// setSlice records slice name of the Service key (nil: deleted) and
// recomputes that Service's endpoints; trigger (if not zero) is when the
// change it carries was seen by its writer.
func (t *tracker) setSlice(key types.NamespacedName, name string, s *discoveryv1.EndpointSlice, trigger time.Time) {
	if !t.inNamespaces(key.Namespace) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !trigger.IsZero() {
		t.triggers = append(t.triggers, trigger)
	}
	e := t.entry(key)
	if s == nil {
		delete(e.slices, name)
	} else {
		e.slices[name] = s
	}
	t.recompute(key, e)
}

// inNamespaces reports whether the Services of namespace ns are read.
func (t *tracker) inNamespaces(ns string) bool { return len(t.namespaces) == 0 || t.namespaces[ns] }

func (t *tracker) entry(key types.NamespacedName) *entry {
	e := t.entries[key]
	if e == nil {
		e = &entry{slices: map[string]*discoveryv1.EndpointSlice{}}
		t.entries[key] = e
	}
	return e
}

// recompute rebuilds e's endpoints and forgets e when nothing is left.
func (t *tracker) recompute(key types.NamespacedName, e *entry) {
	t.epDirty = true
	publishNotReady := e.svc != nil && e.svc.Spec.PublishNotReadyAddresses
	allow := func(slice string, a netip.Addr) bool { return t.filter.allow(key, slice, a) }
	e.endpoints = endpointsOf(e.parts, e.slices, publishNotReady, allow)
	t.eps.replace(&e.epSlots, e.endpoints)
	if e.svc == nil && len(e.slices) == 0 {
		delete(t.entries, key)
	}
}

// snapshot returns the model's lists that changed since the last
// snapshot (nil for the other), and which did, with the trigger times
// of the slice changes since.
func (t *tracker) snapshot() (svcs []servicelb.Service, eps []servicelb.Endpoints, changedSvcs, changedEps bool, triggers []time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	changedSvcs, changedEps = t.svcDirty, t.epDirty
	t.svcDirty, t.epDirty = false, false
	triggers, t.triggers = t.triggers, nil
	if changedSvcs {
		svcs = t.svcs.clone()
	}
	if changedEps {
		eps = t.eps.clone()
	}
	return svcs, eps, changedSvcs, changedEps, triggers
}

// services returns the Services known (for the publisher).
func (t *tracker) services() []*corev1.Service {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*corev1.Service, 0, len(t.entries))
	for _, e := range t.entries {
		if e.svc != nil {
			out = append(out, e.svc)
		}
	}
	return out
}

// markDirty makes the next snapshot hand over both lists.
func (t *tracker) markDirty() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.svcDirty, t.epDirty = true, true
}

// counts returns the number of Services and slices known.
func (t *tracker) counts() (services, slices int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.entries {
		if e.svc != nil {
			services++
		}
		slices += len(e.slices)
	}
	return services, slices
}
