package kubesource

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/filesource"
	"github.com/causeway-net/causeway/pkg/servicelb/nftlb"
)

func newFigureProvider(t *testing.T) *nftlb.Provider {
	t.Helper()
	ns := testutil.NewNetNS(t, "ksfig")
	p, err := nftlb.New(nftlb.Options{NetNS: ns.Handle, Logger: discard})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

// scaleFile is scaleObjects as a services file: the same Services, ports
// and endpoints, endpoint i of generation gen changed.
func scaleFile(n, changed, gen int) []byte {
	var b strings.Builder
	b.WriteString("services:\n")
	for i := range n {
		g := 0
		if i == changed {
			g = gen
		}
		ip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		fmt.Fprintf(&b, "  - {name: svc-%d, namespace: shop, uid: uid-svc-%d, ip: %s, ports: [{name: http, port: 80, protocol: TCP, endpoints: [\"%s:8080\"]}]}\n",
			i, i, ip, endpointIP(i, g))
	}
	return []byte(b.String())
}

// TestNftablesSyncFigures: at 1,000 and 10,000 service ports, from the API
// to the nftables provider's rules: the first sync, then one endpoint
// changed; beside it, in the same run, the services file's cost for the
// same change (the whole file parsed, the lists built and compared as the
// proxy does, the provider's sync). Reported, not asserted.
func TestNftablesSyncFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 10,000 service ports")
	}
	testutil.RequireRoot(t)
	for _, n := range []int{1000, 10000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			apiFigures(t, n)
			fileFigures(t, n)
		})
	}
}

func apiFigures(t *testing.T, n int) {
	p := newFigureProvider(t)
	client := fake.NewClientset(scaleObjects(n)...)
	src, err := New(clientset{client}, proxyName, node, p, WithLogger(discard))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	began := time.Now()
	wg.Go(func() { src.Run(ctx) })
	waitDelivery(t, src, 0)
	delivered := time.Since(began)
	require.NoError(t, p.SyncNow())
	first := time.Since(began)
	st := p.Stats()
	t.Logf("FIGURE: kubesource→nftables %d service ports: first sync %s (delivery %s, nftables %s, %d objects)",
		n, first.Round(time.Millisecond), delivered.Round(time.Millisecond), st.LastDuration.Round(time.Millisecond), st.LastObjects)

	name := fmt.Sprintf("svc-%d", n/2)
	changed := slice("shop", name+"-a", name, discoveryv1.AddressTypeIPv4, ep(endpointIP(n/2, 1).String(), true, true, false))
	before := src.Stats().Deliveries
	began = time.Now()
	_, err = client.DiscoveryV1().EndpointSlices("shop").Update(context.Background(), changed, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitDelivery(t, src, before)
	delivered = time.Since(began)
	require.NoError(t, p.SyncNow())
	total := time.Since(began)
	st = p.Stats()
	require.LessOrEqual(t, st.LastObjects, 4, "one map element and one hairpin element replaced, whatever the size")
	t.Logf("FIGURE: kubesource→nftables %d service ports: one endpoint changed %s (API update → delivery %s, nftables %s, %d objects)",
		n, total.Round(10*time.Microsecond), delivered.Round(10*time.Microsecond), st.LastDuration.Round(10*time.Microsecond), st.LastObjects)
}

// waitDelivery waits for a delivery after the first before (the
// handler's calls returned).
func waitDelivery(t *testing.T, src *Source, before uint64) {
	t.Helper()
	require.Eventually(t, func() bool { return src.Stats().Deliveries > before }, 10*waitFor, 50*time.Microsecond)
}

// fileFigures is the proxy's services-file path for the same change:
// parse and resolve the whole file, build the lists, compare them with
// the last ones, hand over what differs, sync.
func fileFigures(t *testing.T, n int) {
	p := newFigureProvider(t)
	var lastSvcs []servicelb.Service
	var lastEps []servicelb.Endpoints
	load := func(data []byte) time.Duration {
		began := time.Now()
		f, err := filesource.Parse(data)
		require.NoError(t, err)
		f, _ = f.Resolve(filesource.Facts{})
		svcs, eps := f.ServiceList(), f.EndpointList(nil)
		if !reflect.DeepEqual(eps, lastEps) {
			p.OnEndpointsUpdate(eps)
		}
		if !reflect.DeepEqual(svcs, lastSvcs) {
			p.OnServiceUpdate(svcs)
		}
		lastSvcs, lastEps = svcs, eps
		return time.Since(began)
	}
	fed := load(scaleFile(n, -1, 0))
	require.NoError(t, p.SyncNow())
	st := p.Stats()
	t.Logf("FIGURE: file→nftables %d service ports: first sync %s (file %s, nftables %s, %d objects)",
		n, (fed + st.LastDuration).Round(time.Millisecond), fed.Round(time.Millisecond), st.LastDuration.Round(time.Millisecond), st.LastObjects)
	fed = load(scaleFile(n, n/2, 1))
	require.NoError(t, p.SyncNow())
	st = p.Stats()
	require.LessOrEqual(t, st.LastObjects, 4, "one map element and one hairpin element replaced, whatever the size")
	t.Logf("FIGURE: file→nftables %d service ports: one endpoint changed %s (file parsed and compared %s, nftables %s, %d objects)",
		n, (fed + st.LastDuration).Round(10*time.Microsecond), fed.Round(10*time.Microsecond), st.LastDuration.Round(10*time.Microsecond), st.LastObjects)
}

// TestServiceToRulesFigure: from a Service created in the API (its slice
// there already) to its rules applied by the nftables provider, run by
// its sync loop as in the proxy (rate-limited at 100 ms). Reported, not
// asserted.
func TestServiceToRulesFigure(t *testing.T) {
	testutil.RequireRoot(t)
	p := newFigureProvider(t)
	client := fake.NewClientset()
	src, err := New(clientset{client}, proxyName, node, p, WithLogger(discard))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() { p.SyncLoop(ctx) })
	wg.Go(func() { src.Run(ctx) })
	require.Eventually(t, func() bool { return src.Stats().Synced }, waitFor, time.Millisecond)
	var took []time.Duration
	for i := range 5 {
		name := fmt.Sprintf("web-%d", i)
		ip := netip.AddrFrom4([4]byte{10, 96, 1, byte(i)})
		_, err := client.DiscoveryV1().EndpointSlices("shop").Create(ctx,
			slice("shop", name+"-a", name, discoveryv1.AddressTypeIPv4, ep("172.16.0.5", true, true, false)), metav1.CreateOptions{})
		require.NoError(t, err)
		time.Sleep(200 * time.Millisecond) // the slice's sync out of the way
		svc := service("shop", name, ip.String())
		svc.Spec.Ports[0].TargetPort = intstr.FromInt32(8080)
		began := time.Now()
		_, err = client.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return servesPort(p, ip) }, waitFor, 500*time.Microsecond)
		took = append(took, time.Since(began))
	}
	t.Logf("FIGURE: kubesource→nftables: Service created → its rules applied (dispatch element, endpoint): %v", took)
}

// servesPort reports whether the provider's applied state has a port of
// ip with an endpoint.
func servesPort(p *nftlb.Provider, ip netip.Addr) bool {
	for _, ps := range p.PortStates() {
		if ps.Addr.Addr() == ip && len(ps.Endpoints) > 0 && ps.Chain != "" {
			return true
		}
	}
	return false
}

// TestPublisherFigure: what a Publish costs at 10,000 Services with 20
// targets on the node, each Service selecting one of them (so each
// target 500 Services): the first (10,000 slices written), one after a
// target's readiness changed (its 500 slices written), one with nothing
// changed (the wanted slices computed and compared). The writes go to a
// stub that answers at once: the figures are the publisher's own cost,
// without the API's round trips. Reported, not asserted.
func TestPublisherFigure(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 Services")
	}
	const n, nTargets = 10000, 20
	var svcs []*corev1.Service
	for i := range n {
		s := service("shop", fmt.Sprintf("svc-%d", i), netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}).String())
		s.Spec.Selector = map[string]string{"app": fmt.Sprintf("app-%d", i%(n/nTargets*nTargets)/(n/nTargets))}
		svcs = append(svcs, s)
	}
	var tgts []Target
	for i := range nTargets {
		tgts = append(tgts, target(fmt.Sprintf("pod-%d", i), fmt.Sprintf("app-%d", i), true, endpointIP(i, 0).String()))
	}
	pub, err := NewPublisher(memClient{clientset{fake.NewClientset()}}, proxyName, "node-a", WithLogger(discard))
	require.NoError(t, err)
	ctx := context.Background()
	began := time.Now()
	require.NoError(t, pub.Publish(ctx, svcs, tgts))
	first := time.Since(began)
	written := pub.Stats().Slices
	tgts[3].Ready = false
	began = time.Now()
	require.NoError(t, pub.Publish(ctx, svcs, tgts))
	change := time.Since(began)
	began = time.Now()
	require.NoError(t, pub.Publish(ctx, svcs, tgts))
	same := time.Since(began)
	t.Logf("FIGURE: publisher, %d Services, %d targets on the node: first publish %s (%d slices written), one target's readiness changed %s, nothing changed %s",
		n, nTargets, first.Round(time.Millisecond), written, change.Round(time.Millisecond), same.Round(time.Millisecond))
}

// memClient is a Client whose slice writes answer at once with what they
// were given (no store): the publisher's own cost, without an API.
type memClient struct{ Client }

func (c memClient) EndpointSlices(ns string) SliceAPI { return memSlices{c.Client.EndpointSlices(ns)} }

type memSlices struct{ SliceAPI }

func (memSlices) Create(_ context.Context, s *discoveryv1.EndpointSlice, _ metav1.CreateOptions) (*discoveryv1.EndpointSlice, error) {
	return s, nil
}

func (memSlices) Update(_ context.Context, s *discoveryv1.EndpointSlice, _ metav1.UpdateOptions) (*discoveryv1.EndpointSlice, error) {
	return s, nil
}
