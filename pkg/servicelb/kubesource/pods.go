package kubesource

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// Conn is one target connection of this proxy as the proxy knows it: the
// pod its NSM connection names (the podName label), the SPIFFE ID its
// client proved ("" when none; see WithTargetIdentity), its addresses on
// the secondary network, and whether it is up (its interface is a port).
type Conn struct {
	Pod      string
	Identity string
	Addrs    []netip.Addr
	Up       bool
}

// NodePods caches the pods of one node (a field selector on spec.nodeName:
// the targets of this proxy run on its node) and turns the proxy's
// connections into Targets. A connection names its pod by name only (NSM
// carries no namespace): the name is looked up among the node's pods; a
// name that two namespaces use on the node is ambiguous and not published,
// unless the client's proved identity names the namespace
// (WithTargetIdentity), which must then name the pod too.
type NodePods struct {
	client   Client
	node     string
	log      *slog.Logger
	onChange func()
	outage   *outage
	identity identityCheck

	mu     sync.Mutex
	byName map[string][]*corev1.Pod
	synced bool
	// unmatched are the connections' pod names last left out, to log
	// changes only; asked the pod names of the connections last asked
	// about (nil: none yet): a change of another pod is not told.
	unmatched []string
	asked     map[string]bool
	// refused are the (identity, pod) pairs last left out for their
	// identity: a pair is counted when it starts to be.
	refused map[string]bool
}

// NewNodePods returns the cache of node's pods; onChange is called after
// each change (a pod added, changed, deleted) of a pod that the last
// Targets call asked about (of any pod before the first call), and once
// the cache is filled; it must not block.
func NewNodePods(client Client, node string, onChange func(), opts ...Option) (*NodePods, error) {
	if client == nil || node == "" {
		return nil, errors.New("kubesource: the pods of a node need a client and a node name")
	}
	if onChange == nil {
		onChange = func() {}
	}
	o := newOptions(opts)
	log := o.log.With("node", node, "watching", "pods")
	return &NodePods{client: client, node: node, log: log, onChange: onChange, identity: o.identity,
		outage: &outage{log: log, meanwhile: "the targets' slices stay as published until it answers"},
		byName: map[string][]*corev1.Pod{}}, nil
}

// Run runs the informer until ctx ends and returns once it stopped.
func (n *NodePods) Run(ctx context.Context) {
	api := n.client.Pods(metav1.NamespaceAll)
	sel := fields.OneTermEqualSelector("spec.nodeName", n.node).String()
	lw := observedListWatch(n.outage, func(o *metav1.ListOptions) { o.FieldSelector = sel },
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return api.List(ctx, o) }, api.Watch)
	inf := cache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, cache.SharedIndexInformerOptions{})
	_ = inf.SetWatchErrorHandlerWithContext(func(context.Context, *cache.Reflector, error) {})
	_ = inf.SetTransform(slimPod)
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.set(obj, false) },
		UpdateFunc: func(_, obj any) { n.set(obj, false) },
		DeleteFunc: func(obj any) { n.set(unwrap(obj), true) },
	})
	if err != nil {
		n.log.Error("pods informer not started", "error", err)
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { inf.RunWithContext(withClientGoLogger(ctx, n.log)) })
	if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		n.mu.Lock()
		n.synced = true
		n.mu.Unlock()
		n.onChange()
	}
}

// set records pod (deleted: forgets it).
func (n *NodePods) set(obj any, deleted bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	n.mu.Lock()
	same := slices.DeleteFunc(slices.Clone(n.byName[pod.Name]), func(p *corev1.Pod) bool { return p.Namespace == pod.Namespace })
	if !deleted {
		same = append(same, pod)
	}
	if len(same) == 0 {
		delete(n.byName, pod.Name)
	} else {
		n.byName[pod.Name] = same
	}
	tell := n.asked == nil || n.asked[pod.Name]
	n.mu.Unlock()
	if tell {
		n.onChange()
	}
}

// Synced reports whether the cache was filled once.
func (n *NodePods) Synced() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.synced
}

// Targets returns the Targets of conns: each matched to its pod, ready
// when the pod is ready and the connection up. Connections without a pod
// name, or whose pod is unknown or ambiguous, are left out (logged when
// that set changes).
func (n *NodePods) Targets(conns []Conn) []Target {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []Target
	var unmatched []string
	n.asked = make(map[string]bool, len(conns))
	refused := map[string]bool{}
	for _, c := range conns {
		n.asked[c.Pod] = true
		pods := n.byName[c.Pod]
		if len(pods) > 1 && n.identity.on() {
			pods = inNamespaceOf(pods, c.Identity)
		}
		if len(pods) != 1 {
			unmatched = append(unmatched, c.Pod)
			continue
		}
		p := pods[0]
		if !n.proved(c, p, refused) {
			continue
		}
		out = append(out, Target{Namespace: p.Namespace, Pod: p.Name, UID: p.UID, Labels: p.Labels,
			Ready: c.Up && podReady(p), Terminating: p.DeletionTimestamp != nil, Addrs: c.Addrs})
	}
	slices.Sort(unmatched)
	if !slices.Equal(unmatched, n.unmatched) && len(unmatched) > 0 {
		n.log.Warn("target connections not matched to a pod of this node: not published (the podName label of the connection is missing, unknown on the node, or used in two namespaces)",
			"pods", unmatched)
	}
	n.unmatched = unmatched
	n.refused = refused
	return out
}

// proved says whether c's identity names its pod p (always, without the
// check). A refusal is added to refused, and counted when the pair was not
// refused at the last call (and logged once per pair). n.mu must be held.
func (n *NodePods) proved(c Conn, p *corev1.Pod, refused map[string]bool) bool {
	if !n.identity.on() {
		return true
	}
	why := n.identity.miss(c.Identity, p)
	if why == "" {
		return true
	}
	pair := c.Identity + " " + p.Namespace + "/" + p.Name
	if n.identity.refusals != nil && !n.refused[pair] && !refused[pair] {
		n.identity.refusals.Deny("identity", pair, "identity", c.Identity, "namespace", p.Namespace, "pod", p.Name, "reason", why)
	}
	refused[pair] = true
	return false
}

// slimPod keeps of a pod what Targets reads: name, namespace, UID,
// labels, service account, deletion and the Ready condition.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, Labels: p.Labels,
		ResourceVersion: p.ResourceVersion, DeletionTimestamp: p.DeletionTimestamp},
		Spec: corev1.PodSpec{ServiceAccountName: p.Spec.ServiceAccountName}}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out, nil
}

// podReady reads the pod's Ready condition.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodsStats is what NodePods shows.
type PodsStats struct {
	Synced        bool   `json:"synced"`
	APIServerAway bool   `json:"apiServerAway"`
	Outages       uint64 `json:"outages"`
	// Unmatched are the pod names of the connections last left out.
	Unmatched []string `json:"unmatched,omitempty"`
}

// Stats returns what the pods cache knows of itself.
func (n *NodePods) Stats() PodsStats {
	away, outages := n.outage.state()
	n.mu.Lock()
	defer n.mu.Unlock()
	return PodsStats{Synced: n.synced, APIServerAway: away, Outages: outages, Unmatched: slices.Clone(n.unmatched)}
}
