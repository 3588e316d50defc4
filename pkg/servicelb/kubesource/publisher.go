package kubesource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Publisher writes the EndpointSlices of this proxy's targets: one per
// Service and family, named by SliceName, labelled as Causeway's, with the
// proxy name and this node (NodeLabel). It creates, updates and deletes
// only those: at its first Publish it lists the slices carrying its node's
// labels (a previous run's) and deletes the ones no longer wanted.
// Publish computes every wanted slice (cost: Services × this node's
// targets) and writes only the ones that differ from what it wrote last.
type Publisher struct {
	client Client
	name   string
	node   string
	log    *slog.Logger

	kick chan struct{}

	mu        sync.Mutex
	adopted   bool
	applied   map[types.NamespacedName]*discoveryv1.EndpointSlice
	publishes uint64
	lastErr   error
}

// PublisherStats is what a Publisher shows.
type PublisherStats struct {
	// Slices are the slices it has written (and not deleted).
	Slices    int    `json:"slices"`
	Publishes uint64 `json:"publishes"`
	// LastError is the last Publish's error, empty when it succeeded.
	LastError string `json:"lastError,omitempty"`
}

// Stats returns what the publisher has done.
func (p *Publisher) Stats() PublisherStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := PublisherStats{Slices: len(p.applied), Publishes: p.publishes}
	if p.lastErr != nil {
		st.LastError = p.lastErr.Error()
	}
	return st
}

// NewPublisher returns the publisher of node's slices for the proxy name.
func NewPublisher(client Client, name, node string, opts ...Option) (*Publisher, error) {
	if client == nil || name == "" || node == "" {
		return nil, errors.New("kubesource: a publisher needs a client, a proxy name and a node name")
	}
	o := newOptions(opts)
	return &Publisher{client: client, name: name, node: node, log: o.log.With("proxyName", name, "node", node),
		applied: map[types.NamespacedName]*discoveryv1.EndpointSlice{}, kick: make(chan struct{}, 1)}, nil
}

// Publish makes this node's slices those of targets for services (as
// Source.Services returns them). It goes through every slice and returns
// the errors met, each naming its slice; a failed slice is tried again at
// the next Publish. A slice written carries the time of this call as its
// TriggerTimeAnnotation (the change was seen then, or at the retry).
func (p *Publisher) Publish(ctx context.Context, services []*corev1.Service, targets []Target) (err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer func() { p.publishes, p.lastErr = p.publishes+1, err }()
	if !p.adopted {
		if err := p.adopt(ctx); err != nil {
			return err
		}
		p.adopted = true
	}
	seen := time.Now()
	want := p.desired(services, targets)
	var errs []error
	for key, s := range want {
		if cur, ok := p.applied[key]; ok && sameSlice(cur, s) {
			continue
		}
		s.Annotations = map[string]string{TriggerTimeAnnotation: seen.UTC().Format(time.RFC3339Nano)}
		if err := p.put(ctx, key, s); err != nil {
			errs = append(errs, fmt.Errorf("endpoint slice %s: %w", key, err))
		}
	}
	for key := range p.applied {
		if _, ok := want[key]; ok {
			continue
		}
		if err := p.remove(ctx, key); err != nil {
			errs = append(errs, fmt.Errorf("endpoint slice %s: delete: %w", key, err))
		}
	}
	return errors.Join(errs...)
}

// adopt takes up the slices of this node that exist (a previous run's).
func (p *Publisher) adopt(ctx context.Context) error {
	l, err := p.client.EndpointSlices(metav1.NamespaceAll).List(ctx,
		metav1.ListOptions{LabelSelector: ownSliceSelector(p.name, p.node).String()})
	if err != nil {
		return fmt.Errorf("list this node's endpoint slices: %w", err)
	}
	for i := range l.Items {
		s := &l.Items[i]
		p.applied[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
	}
	return nil
}

// put creates or updates the slice key to s.
func (p *Publisher) put(ctx context.Context, key types.NamespacedName, s *discoveryv1.EndpointSlice) error {
	api := p.client.EndpointSlices(key.Namespace)
	cur, known := p.applied[key]
	if !known {
		out, err := api.Create(ctx, s, metav1.CreateOptions{})
		if err == nil {
			p.written(key, s, out, "created")
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create: %w", err)
		}
		if cur, err = api.Get(ctx, key.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("get after a create that found it: %w", err)
		}
	}
	return p.update(ctx, key, cur, s)
}

// update writes s over cur, with cur's resource version; a conflict or a
// slice deleted meanwhile is read again or created.
func (p *Publisher) update(ctx context.Context, key types.NamespacedName, cur, s *discoveryv1.EndpointSlice) error {
	api := p.client.EndpointSlices(key.Namespace)
	next := s.DeepCopy()
	next.ResourceVersion = cur.ResourceVersion
	out, err := api.Update(ctx, next, metav1.UpdateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		delete(p.applied, key)
		out, err = api.Create(ctx, s, metav1.CreateOptions{})
	case apierrors.IsConflict(err):
		if cur, err = api.Get(ctx, key.Name, metav1.GetOptions{}); err == nil {
			next.ResourceVersion = cur.ResourceVersion
			out, err = api.Update(ctx, next, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	p.written(key, s, out, "updated")
	return nil
}

// remove deletes the slice key (gone already is fine).
func (p *Publisher) remove(ctx context.Context, key types.NamespacedName) error {
	err := p.client.EndpointSlices(key.Namespace).Delete(ctx, key.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	delete(p.applied, key)
	p.log.Debug("endpoint slice deleted", "slice", key.String())
	return nil
}

// written records s as written, with the resource version of out (what
// the API answered): comparing with what was sent, the API's defaults
// never make a slice look changed.
func (p *Publisher) written(key types.NamespacedName, s, out *discoveryv1.EndpointSlice, what string) {
	s = s.DeepCopy()
	s.ResourceVersion = out.ResourceVersion
	p.applied[key] = s
	p.log.Debug("endpoint slice "+what, "slice", key.String(), "endpoints", len(s.Endpoints))
}

// sameSlice reports whether a written slice already says what s says
// (the fields desired sets; compared by hand: a reflective comparison of
// every slice took half of a Publish at 10,000 Services).
func sameSlice(cur, s *discoveryv1.EndpointSlice) bool {
	return cur.AddressType == s.AddressType && maps.Equal(cur.Labels, s.Labels) &&
		slices.Equal(cur.OwnerReferences, s.OwnerReferences) && // no pointer field set by desired
		slices.EqualFunc(cur.Ports, s.Ports, samePort) &&
		slices.EqualFunc(cur.Endpoints, s.Endpoints, sameEndpoint)
}

func samePort(a, b discoveryv1.EndpointPort) bool {
	return sameValue(a.Name, b.Name) && sameValue(a.Protocol, b.Protocol) && sameValue(a.Port, b.Port) &&
		sameValue(a.AppProtocol, b.AppProtocol)
}

func sameEndpoint(a, b discoveryv1.Endpoint) bool {
	return slices.Equal(a.Addresses, b.Addresses) && sameValue(a.Conditions.Ready, b.Conditions.Ready) &&
		sameValue(a.Conditions.Serving, b.Conditions.Serving) && sameValue(a.Conditions.Terminating, b.Conditions.Terminating) &&
		sameValue(a.NodeName, b.NodeName) && sameValue(a.Hostname, b.Hostname) && sameValue(a.Zone, b.Zone) &&
		((a.TargetRef == nil) == (b.TargetRef == nil)) && (a.TargetRef == nil || *a.TargetRef == *b.TargetRef) &&
		a.Hints == nil && b.Hints == nil && len(a.DeprecatedTopology) == 0 && len(b.DeprecatedTopology) == 0
}

// sameValue compares two optional values.
func sameValue[T comparable](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}
