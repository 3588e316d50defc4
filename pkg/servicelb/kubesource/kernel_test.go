package kubesource_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/slbtest"
	"github.com/causeway-net/causeway/pkg/servicelb/kubesource"
	"github.com/causeway-net/causeway/pkg/servicelb/kubesource/clientset"
	"github.com/causeway-net/causeway/pkg/servicelb/provider"
)

const kernelProxyName = "conduit-k.trench-k.ns"

// waitFor guards that something happened at all; it asserts no duration.
const waitFor = 60 * time.Second

// echoService is the Service "echo" of namespace test for both families of
// slbtest's service IPs, TCP and UDP port 80 to the echo port, ClientIP
// affinity when sticky.
func echoService(echoPort uint16, sticky bool) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "test", Name: "echo", UID: "uid-echo",
			Labels: map[string]string{kubesource.ProxyNameLabel: kernelProxyName}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP,
			ClusterIP:  slbtest.ServiceIP4.String(),
			ClusterIPs: []string{slbtest.ServiceIP4.String(), slbtest.ServiceIP6.String()},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Selector:   map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{
				{Name: "tcp", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(int32(echoPort))},
				{Name: "udp", Port: 80, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(int32(echoPort))},
			}},
	}
	if sticky {
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	}
	return s
}

// targets are the topology's endpoints as this node's targets of app echo.
func targets(topo *slbtest.Topology, notReady string) []kubesource.Target {
	var out []kubesource.Target
	for _, h := range topo.Endpoints {
		out = append(out, kubesource.Target{Namespace: "test", Pod: h.Name, UID: types.UID("uid-" + h.Name),
			Labels: map[string]string{"app": "echo"}, Ready: h.Name != notReady, Addrs: []netip.Addr{h.Addr4, h.Addr6}})
	}
	return out
}

// kernelRig is a provider in a topology's proxy namespace fed by a Source
// on a fake clientset, with a Publisher of the topology's endpoints.
type kernelRig struct {
	topo *slbtest.Topology
	echo *slbtest.Echo
	cs   *fake.Clientset
	src  *kubesource.Source
	pub  *kubesource.Publisher
}

func newKernelRig(t *testing.T, providerName string, objs ...runtime.Object) *kernelRig {
	t.Helper()
	topo := slbtest.New(t, 2)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	if providerName == servicelb.ProviderNftables {
		topo.BridgeNetfilter(t)
	}
	p, err := provider.New(provider.Config{Provider: providerName, NetNS: topo.Proxy.Handle, Logger: slbtest.Logger(),
		SyncPeriod: 30 * time.Second})
	require.NoError(t, err)
	cs := fake.NewClientset(objs...)
	client := clientset.New(cs)
	src, err := kubesource.New(client, kernelProxyName, "node-k", p, kubesource.WithLogger(slbtest.Logger()))
	require.NoError(t, err)
	pub, err := kubesource.NewPublisher(client, kernelProxyName, "node-k", kubesource.WithLogger(slbtest.Logger()))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { p.SyncLoop(ctx) })
	wg.Go(func() { src.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		require.NoError(t, p.Close())
		require.NoError(t, p.CleanupLeftovers())
	})
	require.Eventually(t, func() bool { return src.Stats().Synced }, waitFor, 5*time.Millisecond)
	return &kernelRig{topo: topo, echo: echo, cs: cs, src: src, pub: pub}
}

// hello opens one flow from the client to the service port and returns
// who answered.
func (r *kernelRig) hello(t testing.TB, proto servicelb.Protocol, ip netip.Addr) (string, error) {
	s := slbtest.Subject{Topo: r.topo}
	g, err := s.Hello(t, proto, netip.AddrPortFrom(ip, 80))
	return g.Endpoint, err
}

// TestKernelFlowsFromTheAPI feeds each provider from the API: a Service
// and the slices this node publishes for its targets; flows of both
// families and protocols reach the targets, and a target whose pod is not
// ready stops getting new ones.
func TestKernelFlowsFromTheAPI(t *testing.T) {
	testutil.RequireRoot(t)
	for _, name := range []string{servicelb.ProviderNftables, servicelb.ProviderUserspace} {
		t.Run(name, func(t *testing.T) {
			r := newKernelRig(t, name)
			_, err := r.cs.CoreV1().Services("test").Create(context.Background(), echoService(r.echo.Port, false), metav1.CreateOptions{})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return len(r.src.Services()) == 1 }, waitFor, 5*time.Millisecond)
			require.NoError(t, r.pub.Publish(context.Background(), r.src.Services(), targets(r.topo, "")))
			for _, ip := range []netip.Addr{slbtest.ServiceIP4, slbtest.ServiceIP6} {
				for _, proto := range []servicelb.Protocol{servicelb.TCP, servicelb.UDP} {
					seen := map[string]bool{}
					require.Eventually(t, func() bool {
						ep, err := r.hello(t, proto, ip)
						seen[ep] = err == nil || seen[ep]
						return seen["ep1"] && seen["ep2"]
					}, waitFor, 10*time.Millisecond, "%s %s: flows reach both targets", proto, ip)
				}
			}

			// ep1's pod not ready: its endpoint leaves, the flows go to ep2.
			require.NoError(t, r.pub.Publish(context.Background(), r.src.Services(), targets(r.topo, "ep1")))
			// (Each family's slice is its own update: wait for both.)
			require.Eventually(t, func() bool {
				for _, ip := range []netip.Addr{slbtest.ServiceIP4, slbtest.ServiceIP6} {
					for range 4 {
						if ep, err := r.hello(t, servicelb.TCP, ip); err != nil || ep != "ep2" {
							return false
						}
					}
				}
				return true
			}, waitFor, 10*time.Millisecond)
			for _, ip := range []netip.Addr{slbtest.ServiceIP4, slbtest.ServiceIP6} {
				for range 4 {
					ep, err := r.hello(t, servicelb.UDP, ip)
					require.NoError(t, err)
					require.Equal(t, "ep2", ep, "UDP %s: the not ready target gets no new flow", ip)
				}
			}
		})
	}
}
