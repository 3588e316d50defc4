package kubesource

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimepkg "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/causeway-net/causeway/internal/limits"
	"github.com/causeway-net/causeway/pkg/servicelb"
)

// awaiter is a Handler that says when an endpoint first appears.
type awaiter struct {
	mu    sync.Mutex
	want  netip.AddrPort
	seen  chan struct{}
	first chan struct{} // closed at the first delivery
	ports int
}

func (a *awaiter) OnServiceUpdate(s []servicelb.Service) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ports = 0
	for _, svc := range s {
		a.ports += len(svc.Ports)
	}
	select {
	case <-a.first:
	default:
		close(a.first)
	}
}

func (a *awaiter) OnEndpointsUpdate(eps []servicelb.Endpoints) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.want.IsValid() {
		return
	}
	for _, e := range eps {
		for _, p := range e.Ports {
			for _, ad := range p.Addresses {
				if ad == a.want {
					a.want = netip.AddrPort{}
					close(a.seen)
					return
				}
			}
		}
	}
}

func (a *awaiter) expect(ad netip.AddrPort) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.want, a.seen = ad, make(chan struct{})
}

// scaleObjects returns n Services of one port each, and one slice with one
// ready endpoint for each.
func scaleObjects(n int) []runtimepkg.Object {
	objs := make([]runtimepkg.Object, 0, 2*n)
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		ip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		objs = append(objs, service("shop", name, ip.String()),
			slice("shop", name+"-a", name, discoveryv1.AddressTypeIPv4, ep(endpointIP(i, 0).String(), true, true, false)))
	}
	return objs
}

func endpointIP(i, gen int) netip.Addr {
	return netip.AddrFrom4([4]byte{172, 16 + byte(gen), byte(i >> 8), byte(i)})
}

// The figures of the issue: sync time at 1,000 and 10,000 service ports
// from the API, the cost of one changed endpoint at each, and the heap the
// informers and the model hold. Reported, not asserted.
func TestSyncFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 10,000 service ports")
	}
	for _, n := range []int{1000, 10000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { syncFigures(t, n) })
	}
}

func syncFigures(t *testing.T, n int) {
	m := measureSync(t, n)
	t.Logf("FIGURE: kubesource %d service ports: first sync %s (informers list, caches, model, delivery)", n, m.first.Round(time.Millisecond))
	t.Logf("FIGURE: kubesource %d service ports: one endpoint changed: %s from the API update to the delivery, of which %s assembling the lists and the handler's calls (endpoints only)",
		n, m.change.Round(10*time.Microsecond), m.delivery.Round(10*time.Microsecond))
	t.Logf("FIGURE: kubesource %d service ports: heap held after sync %.1f MiB (informer caches and model, the fake's store not counted)",
		n, m.heapMiB)
}

// syncMeasure is what measureSync measured.
type syncMeasure struct {
	first    time.Duration // Run to the first delivery
	change   time.Duration // one endpoint updated in the API to its delivery
	delivery time.Duration // of which the source's assembly and handler calls
	heapMiB  float64       // heap held after the first sync
}

// measureSync runs a source with opts over n service ports of the API (one
// Service and one slice each) and measures its first sync and one changed
// endpoint.
func measureSync(t testing.TB, n int, opts ...Option) syncMeasure {
	t.Helper()
	client := fake.NewClientset(scaleObjects(n)...)
	h := &awaiter{first: make(chan struct{})}
	src, err := New(clientset{client}, proxyName, node, h, append([]Option{WithLogger(discard)}, opts...)...)
	require.NoError(t, err)
	heap0 := heapInUse()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	began := time.Now()
	go func() { defer close(done); src.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-h.first:
	case <-time.After(10 * waitFor):
		t.Fatal("no first delivery")
	}
	var m syncMeasure
	m.first = time.Since(began)
	h.mu.Lock()
	require.Equal(t, n, h.ports)
	h.mu.Unlock()
	m.heapMiB = float64(int64(heapInUse())-int64(heap0)) / (1 << 20)

	// One endpoint changes.
	h.expect(netip.AddrPortFrom(endpointIP(n/2, 1), 8080))
	name := fmt.Sprintf("svc-%d", n/2)
	changed := slice("shop", name+"-a", name, discoveryv1.AddressTypeIPv4, ep(endpointIP(n/2, 1).String(), true, true, false))
	began = time.Now()
	_, err = client.DiscoveryV1().EndpointSlices("shop").Update(context.Background(), changed, metav1.UpdateOptions{})
	require.NoError(t, err)
	select {
	case <-h.seen:
	case <-time.After(waitFor):
		t.Fatal("the changed endpoint was not delivered")
	}
	m.change = time.Since(began)
	m.delivery = src.Stats().LastDelivery
	return m
}

// BenchmarkSyncChecks is the cost of the source's checks (docs/security.md) on
// the service LB's sync at 10,000 service ports: the first sync and one
// changed endpoint with the checks off (no endpoint pools, no bound on
// Services, every namespace) and on (endpoints held to the conduit's pool,
// Services counted against a bound above n, an opt-in namespace list),
// alternating in the same run, each first in turn; the medians are the
// FIGURE.
//
//	go test -run '^$' -bench SyncChecks -benchtime 1x ./pkg/servicelb/kubesource
func BenchmarkSyncChecks(b *testing.B) {
	const n, rounds = 10000, 3
	checks := []Option{
		WithEndpointPools([]netip.Prefix{netip.MustParsePrefix("172.16.0.0/12")}),
		WithMaxServices(2*n, limits.New("bench", discard)),
		WithNamespaces([]string{"shop"}),
	}
	got := map[bool][]syncMeasure{}
	for b.Loop() {
		for r := range rounds {
			for _, on := range []bool{r%2 == 1, r%2 == 0} { // each first in turn
				opts := []Option{}
				if on {
					opts = checks
				}
				got[on] = append(got[on], measureSync(b, n, opts...))
			}
		}
	}
	med := func(on bool, f func(syncMeasure) time.Duration) time.Duration {
		ds := make([]time.Duration, 0, len(got[on]))
		for _, m := range got[on] {
			ds = append(ds, f(m))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	first := func(m syncMeasure) time.Duration { return m.first }
	change := func(m syncMeasure) time.Duration { return m.change }
	b.ReportMetric(float64(med(true, first).Milliseconds()), "first-sync-ms-on")
	b.ReportMetric(float64(med(false, first).Milliseconds()), "first-sync-ms-off")
	b.Logf("FIGURE: service LB's kubernetes source at %d service ports (median of %d, alternating): first sync %s without the checks, %s with them (endpoint pools, Services bound, namespaces): %.2f×; one endpoint changed %s without, %s with",
		n, rounds, med(false, first).Round(time.Millisecond), med(true, first).Round(time.Millisecond),
		float64(med(true, first))/float64(med(false, first)), med(false, change).Round(10*time.Microsecond), med(true, change).Round(10*time.Microsecond))
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkOneEndpointChange is the source's own cost of one changed
// slice at 1,000 and 10,000 service ports: the Service's endpoints
// recomputed, the lists assembled (no informer, no handler); without the
// source's checks and with them (endpoints held to a pool, Services
// counted against a bound, an opt-in namespace list), side by side.
func BenchmarkOneEndpointChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, checks := range []bool{false, true} {
			b.Run(fmt.Sprintf("%d/checks=%v", n, checks), func(b *testing.B) { benchOneEndpointChange(b, n, checks) })
		}
	}
}

func benchOneEndpointChange(b *testing.B, n int, checks bool) {
	var pools []netip.Prefix
	if checks {
		pools = []netip.Prefix{netip.MustParsePrefix("172.16.0.0/12")}
	}
	tr := newTracker(discard, nil, func(*corev1.Service, []problem) {}, newEndpointFilter(pools, discard))
	if checks {
		tr.maxServices, tr.refusals, tr.namespaces = 2*n, limits.New("bench", discard), map[string]bool{"shop": true}
	}
	var last *discoveryv1.EndpointSlice
	for _, o := range scaleObjects(n) {
		switch o := o.(type) {
		case *corev1.Service:
			tr.setService(types.NamespacedName{Namespace: o.Namespace, Name: o.Name}, o)
		case *discoveryv1.EndpointSlice:
			tr.setSlice(types.NamespacedName{Namespace: o.Namespace, Name: o.Labels[ServiceNameLabel]}, o.Name, o, time.Time{})
			last = o
		}
	}
	tr.snapshot()
	key := types.NamespacedName{Namespace: last.Namespace, Name: last.Labels[ServiceNameLabel]}
	b.ResetTimer()
	for b.Loop() {
		tr.setSlice(key, last.Name, last, time.Time{})
		_, eps, _, _, _ := tr.snapshot()
		if len(eps) != n {
			b.Fatal(len(eps))
		}
	}
}
