package kubesource

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
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
	client := fake.NewClientset(scaleObjects(n)...)
	h := &awaiter{first: make(chan struct{})}
	src, err := New(clientset{client}, proxyName, h, WithLogger(discard))
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
	synced := time.Since(began)
	h.mu.Lock()
	require.Equal(t, n, h.ports)
	h.mu.Unlock()
	heap1 := heapInUse()

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
	change := time.Since(began)
	st := src.Stats()
	t.Logf("FIGURE: kubesource %d service ports: first sync %s (informers list, caches, model, delivery)", n, synced.Round(time.Millisecond))
	t.Logf("FIGURE: kubesource %d service ports: one endpoint changed: %s from the API update to the delivery, of which %s assembling the lists and the handler's calls (endpoints only)",
		n, change.Round(10*time.Microsecond), st.LastDelivery.Round(10*time.Microsecond))
	t.Logf("FIGURE: kubesource %d service ports: heap held after sync %.1f MiB (informer caches and model, the fake's store not counted)",
		n, float64(int64(heap1)-int64(heap0))/(1<<20))
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkOneEndpointChange is the source's own cost of one changed
// slice at 1,000 and 10,000 service ports: the Service's endpoints
// recomputed, the lists assembled (no informer, no handler).
func BenchmarkOneEndpointChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			tr := newTracker(discard, nil, func(*corev1.Service, []problem) {}, newEndpointFilter(nil, discard))
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
		})
	}
}
