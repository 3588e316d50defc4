package kubesource

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/causeway-net/causeway/pkg/servicelb"
)

// Services labelled for the proxy name are served as they are added,
// changed and deleted; others are not.
func TestServicesFollowTheAPI(t *testing.T) {
	ctx := context.Background()
	other := service("shop", "theirs", "10.96.0.20")
	other.Labels = nil
	foreign := service("shop", "foreign", "10.96.0.21")
	foreign.Labels[ProxyNameLabel] = "another-conduit"
	headless := service("shop", "headless", "10.96.0.22")
	headless.Spec.ClusterIP, headless.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
	client := fake.NewClientset(service("shop", "web", "10.96.0.10"), other, foreign, headless)
	svcs := client.CoreV1().Services("shop")
	_, rec := start(t, client)

	web := spn("shop", "web", "http")
	require.Equal(t, []servicelb.ServicePortName{web}, keys(rec.ports()), "only the labelled, non-headless Service")
	assert.Equal(t, servicelb.ServicePortInfo{Name: web, Ref: servicelb.Reference{Namespace: "shop", Name: "web", UID: "uid-web"},
		IP: addr("10.96.0.10"), Port: 80, Protocol: servicelb.TCP, Affinity: servicelb.AffinityNone}, rec.ports()[web])

	// Added: a UDP port, ClientIP affinity with a timeout.
	dns := service("shop", "dns", "10.96.0.53")
	dns.Spec.Ports = []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}, {Name: "sctp", Port: 9, Protocol: corev1.ProtocolSCTP}}
	dns.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	dns.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(600))}}
	_, err := svcs.Create(ctx, dns, metav1.CreateOptions{})
	require.NoError(t, err)
	d := spn("shop", "dns", "dns")
	require.Eventually(t, func() bool { return len(rec.ports()) == 2 }, waitFor, 5*time.Millisecond)
	assert.Equal(t, servicelb.ServicePortInfo{Name: d, Ref: servicelb.Reference{Namespace: "shop", Name: "dns", UID: "uid-dns"},
		IP: addr("10.96.0.53"), Port: 53, Protocol: servicelb.UDP, Affinity: servicelb.AffinityClientIP, AffinityTimeout: 10 * time.Minute},
		rec.ports()[d], "UDP with affinity; SCTP left out")

	// Changed: the web port moves.
	changed := service("shop", "web", "10.96.0.10")
	changed.Spec.Ports[0].Port = 8000
	_, err = svcs.Update(ctx, changed, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rec.ports()[web].Port == 8000 }, waitFor, 5*time.Millisecond)

	// The label removed: no longer ours.
	changed.Labels = nil
	_, err = svcs.Update(ctx, changed, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := rec.ports()[web]; return !ok }, waitFor, 5*time.Millisecond)

	// Deleted.
	require.NoError(t, svcs.Delete(ctx, "dns", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return len(rec.ports()) == 0 }, waitFor, 5*time.Millisecond)
}

// A dual-stack Service is served in both families; the secondary family's
// part has its own name, its endpoints come from the slices of its family.
func TestDualStack(t *testing.T) {
	svc := service("shop", "web", "fd00:96::10", "10.96.0.10")
	client := fake.NewClientset(svc,
		slice("shop", "web-a-v4", "web", discoveryv1.AddressTypeIPv4, ep("172.16.0.5", true, true, false)),
		slice("shop", "web-a-v6", "web", discoveryv1.AddressTypeIPv6, ep("fd00:5::5", true, true, false)))
	_, rec := start(t, client)

	v6, v4 := spn("shop", "web", "http"), spn("shop", "web/IPv4", "http")
	ports := rec.ports()
	require.Len(t, ports, 2)
	assert.Equal(t, addr("fd00:96::10"), ports[v6].IP, "the primary family keeps the Service's name")
	assert.Equal(t, addr("10.96.0.10"), ports[v4].IP)
	assert.Equal(t, "uid-web", ports[v4].Ref.UID)
	eps := rec.endpoints()
	assert.Equal(t, addrs("[fd00:5::5]:8080"), eps[v6])
	assert.Equal(t, addrs("172.16.0.5:8080"), eps[v4])
}

// Endpoints follow the slices: ready endpoints serve, not-ready ones do
// not, serving terminating ones only when none is ready; other managers'
// slices and other ports are ignored.
func TestEndpointsFollowSlices(t *testing.T) {
	ctx := context.Background()
	kubes := slice("shop", "web-kube", "web", discoveryv1.AddressTypeIPv4, ep("10.244.0.9", true, true, false))
	kubes.Labels[ManagedByLabel] = "endpointslice-controller.k8s.io"
	client := fake.NewClientset(service("shop", "web", "10.96.0.10"), kubes,
		slice("shop", "web-a", "web", discoveryv1.AddressTypeIPv4,
			ep("172.16.0.5", true, true, false), ep("172.16.0.6", false, false, false), ep("172.16.0.7", false, true, true)),
		slice("shop", "web-b", "web", discoveryv1.AddressTypeIPv4, ep("172.16.1.5", true, true, false)))
	api := client.DiscoveryV1().EndpointSlices("shop")
	_, rec := start(t, client)
	web := spn("shop", "web", "http")
	require.Equal(t, addrs("172.16.0.5:8080", "172.16.1.5:8080"), rec.endpoints()[web], "ready ones, of both slices, not the primary network's")

	// Slice b's target becomes not ready, slice a's leaves: the
	// terminating but serving one takes over.
	_, err := api.Update(ctx, slice("shop", "web-b", "web", discoveryv1.AddressTypeIPv4, ep("172.16.1.5", false, false, false)), metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = api.Update(ctx, slice("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, ep("172.16.0.7", false, true, true)), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return equalAddrs(rec.endpoints()[web], addrs("172.16.0.7:8080")) }, waitFor, 5*time.Millisecond)

	// A slice with another port name serves nothing of "http"; deleting
	// the others leaves the port without endpoints.
	renamed := slice("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, ep("172.16.0.8", true, true, false))
	renamed.Ports[0].Name = ptr.To("metrics")
	_, err = api.Update(ctx, renamed, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, api.Delete(ctx, "web-b", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { _, ok := rec.endpoints()[web]; return !ok }, waitFor, 5*time.Millisecond)
	assert.Len(t, rec.ports(), 1, "the service port stays, without endpoints")
}

// A proxy's endpoints are its own node's targets, the only ones it has a
// path to: the slices that other nodes' proxies publish (and a slice
// without a node) are not read, and a slice that moves to another node
// takes its endpoints along.
func TestOnlyOwnNodesEndpoints(t *testing.T) {
	ctx := context.Background()
	theirs := slice("shop", "web-b", "web", discoveryv1.AddressTypeIPv4, ep("172.16.1.5", true, true, false))
	theirs.Labels[NodeLabel] = "node-b"
	nameless := slice("shop", "web-x", "web", discoveryv1.AddressTypeIPv4, ep("172.16.2.5", true, true, false))
	delete(nameless.Labels, NodeLabel)
	client := fake.NewClientset(service("shop", "web", "10.96.0.10"), theirs, nameless,
		slice("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, ep("172.16.0.5", true, true, false)))
	api := client.DiscoveryV1().EndpointSlices("shop")
	src, rec := start(t, client)
	web := spn("shop", "web", "http")
	require.Equal(t, addrs("172.16.0.5:8080"), rec.endpoints()[web], "node a's target only")
	_, n := src.counts()
	assert.Equal(t, 1, n, "only node a's slice cached")

	// Another node's slice written meanwhile stays out (the fake's watch
	// does not filter by label: the handler does).
	later := slice("shop", "web-c", "web", discoveryv1.AddressTypeIPv4, ep("172.16.3.5", true, true, false))
	later.Labels[NodeLabel] = "node-c"
	_, err := api.Create(ctx, later, metav1.CreateOptions{})
	require.NoError(t, err)
	mine := slice("shop", "web-a2", "web", discoveryv1.AddressTypeIPv4, ep("172.16.0.6", true, true, false))
	_, err = api.Create(ctx, mine, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return equalAddrs(rec.endpoints()[web], addrs("172.16.0.5:8080", "172.16.0.6:8080"))
	}, waitFor, 5*time.Millisecond, "node a's second slice in, node c's out")

	// A slice relabelled for another node leaves.
	mine.Labels[NodeLabel] = "node-b"
	_, err = api.Update(ctx, mine, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return equalAddrs(rec.endpoints()[web], addrs("172.16.0.5:8080")) }, waitFor, 5*time.Millisecond)
}

// A change to one slice hands over endpoints only: the service list is
// not delivered again.
func TestSliceChangeDeliversEndpointsOnly(t *testing.T) {
	client := fake.NewClientset(service("shop", "web", "10.96.0.10"),
		slice("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, ep("172.16.0.5", true, true, false)))
	_, rec := start(t, client)
	rec.mu.Lock()
	svcCalls, epCalls := rec.svcCalls, rec.epCalls
	rec.mu.Unlock()
	_, err := client.DiscoveryV1().EndpointSlices("shop").Update(context.Background(),
		slice("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, ep("172.16.0.6", true, true, false)), metav1.UpdateOptions{})
	require.NoError(t, err)
	web := spn("shop", "web", "http")
	require.Eventually(t, func() bool { return equalAddrs(rec.endpoints()[web], addrs("172.16.0.6:8080")) }, waitFor, 5*time.Millisecond)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Equal(t, svcCalls, rec.svcCalls)
	assert.Greater(t, rec.epCalls, epCalls)
}
