package kubesource

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/causeway-net/causeway/pkg/servicelb"
)

const proxyName = "causeway-conduit-a"

// node is the node of the proxy under test: the slices of slice() are
// its proxy's.
const node = "node-a"

// waitFor guards that something happened at all; it asserts no duration.
const waitFor = 60 * time.Second

// recorder is a Handler keeping every delivery.
type recorder struct {
	mu        sync.Mutex
	svcs      []servicelb.Service
	eps       []servicelb.Endpoints
	svcCalls  int
	epCalls   int
	emptySvcs int // deliveries of an empty service list
}

func (r *recorder) OnServiceUpdate(s []servicelb.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.svcs, r.svcCalls = s, r.svcCalls+1
	if len(s) == 0 {
		r.emptySvcs++
	}
}

func (r *recorder) OnEndpointsUpdate(e []servicelb.Endpoints) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.eps, r.epCalls = e, r.epCalls+1
}

// ports returns the service ports delivered last, by name.
func (r *recorder) ports() map[servicelb.ServicePortName]servicelb.ServicePortInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return servicelb.PortsByName(r.svcs, discard)
}

// endpoints returns the endpoints delivered last, by service port.
func (r *recorder) endpoints() map[servicelb.ServicePortName][]netip.AddrPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[servicelb.ServicePortName][]netip.AddrPort{}
	for _, e := range r.eps {
		for k, v := range e.ByPort() {
			out[k] = v
		}
	}
	return out
}

// start runs a source on client until the test ends, and waits for its
// first delivery.
func start(t *testing.T, client *fake.Clientset) (*Source, *recorder) {
	t.Helper()
	return startWith(t, client, testLogger(t))
}

// startWith is start logging to log.
func startWith(t *testing.T, client *fake.Clientset, log *slog.Logger, opts ...Option) (*Source, *recorder) {
	t.Helper()
	rec := &recorder{}
	src, err := New(clientset{client}, proxyName, node, rec, append([]Option{WithLogger(log)}, opts...)...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); src.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { return src.Stats().Deliveries > 0 }, waitFor, 5*time.Millisecond)
	return src, rec
}

// service is a labelled ClusterIP Service with TCP port 80 "http".
func service(ns, name string, ips ...string) *corev1.Service {
	fams := make([]corev1.IPFamily, 0, len(ips))
	for _, ip := range ips {
		fams = append(fams, familyOf(netip.MustParseAddr(ip)))
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{ProxyNameLabel: proxyName}},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: ips[0], ClusterIPs: ips, IPFamilies: fams,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

// ep is an endpoint at addr with the given readiness.
func ep(addr string, ready, serving, terminating bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{
		Ready: ptr.To(ready), Serving: ptr.To(serving), Terminating: ptr.To(terminating)}}
}

// slice is a Causeway slice of the Service ns/svc, port "http" TCP 8080,
// published by the proxy of node.
func slice(ns, name, svc string, fam discoveryv1.AddressType, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			ServiceNameLabel: svc, ManagedByLabel: ManagedBy, ProxyNameLabel: proxyName, NodeLabel: node}},
		AddressType: fam,
		Endpoints:   eps,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(8080))}},
	}
}

func spn(ns, name, port string) servicelb.ServicePortName {
	return servicelb.ServicePortName{Namespace: ns, Name: name, Port: port}
}

func addrs(s ...string) []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(s))
	for _, a := range s {
		out = append(out, netip.MustParseAddrPort(a))
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return out
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func keys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func equalAddrs(a, b []netip.AddrPort) bool { return slices.Equal(a, b) }

type runtimeObject = runtime.Object

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
