package kubesource

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/causeway-net/causeway/pkg/servicelb/kubesource/kubefake"
)

func target(pod, app string, ready bool, ips ...string) Target {
	t := Target{Namespace: "shop", Pod: pod, UID: types.UID("uid-" + pod), Labels: map[string]string{"app": app}, Ready: ready}
	for _, ip := range ips {
		t.Addrs = append(t.Addrs, netip.MustParseAddr(ip))
	}
	return t
}

// writes counts the create, update and delete calls on slices so far.
func writes(c *fake.Clientset) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetResource().Resource == "endpointslices" && (a.GetVerb() == "create" || a.GetVerb() == "update" || a.GetVerb() == "delete") {
			n++
		}
	}
	return n
}

func getSlice(t *testing.T, c *fake.Clientset, name string) *discoveryv1.EndpointSlice {
	t.Helper()
	s, err := c.DiscoveryV1().EndpointSlices("shop").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return s
}

// The publisher writes one slice per Service and family for the targets
// the Service selects, follows their readiness and departure, and touches
// only this node's slices.
func TestPublisherWritesOwnSlices(t *testing.T) {
	ctx := context.Background()
	theirs := slice("shop", "web-nodeb-v4", "web", discoveryv1.AddressTypeIPv4, ep("172.16.1.5", true, true, false))
	theirs.Labels[NodeLabel] = "node-b"
	stale := slice("shop", SliceName("gone", "node-a", corev1.IPv4Protocol), "gone", discoveryv1.AddressTypeIPv4, ep("172.16.0.9", true, true, false))
	stale.Labels[NodeLabel] = "node-a"
	client := fake.NewClientset(theirs, stale)
	pub, err := NewPublisher(clientset{client}, proxyName, "node-a", WithLogger(testLogger(t)))
	require.NoError(t, err)

	web := service("shop", "web", "10.96.0.10", "fd00:96::10")
	noSel := service("shop", "manual", "10.96.0.11")
	noSel.Spec.Selector = nil
	svcs := []*corev1.Service{web, noSel}
	targets := []Target{
		target("a", "web", true, "172.16.0.5", "fd00:5::5"),
		target("b", "web", false, "172.16.0.6"),
		target("c", "other", true, "172.16.0.7"),
	}
	require.NoError(t, pub.Publish(ctx, svcs, targets))

	v4 := getSlice(t, client, SliceName("web", "node-a", corev1.IPv4Protocol))
	assert.Equal(t, map[string]string{ServiceNameLabel: "web", ManagedByLabel: ManagedBy, ProxyNameLabel: proxyName, NodeLabel: "node-a"}, v4.Labels)
	// Owned by the pods it lists (the garbage collector deletes it once
	// they are all gone, a deleted node's with its pods), not the Service.
	assert.Equal(t, []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "Pod", Name: "a", UID: "uid-a"},
		{APIVersion: "v1", Kind: "Pod", Name: "b", UID: "uid-b"},
	}, v4.OwnerReferences)
	assert.Equal(t, discoveryv1.AddressTypeIPv4, v4.AddressType)
	assert.Equal(t, []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(8080))}}, v4.Ports)
	require.Len(t, v4.Endpoints, 2, "a and b, not c")
	assert.Equal(t, []string{"172.16.0.5"}, v4.Endpoints[0].Addresses)
	assert.True(t, *v4.Endpoints[0].Conditions.Ready)
	assert.Equal(t, "a", v4.Endpoints[0].TargetRef.Name)
	assert.Equal(t, "node-a", *v4.Endpoints[0].NodeName)
	assert.False(t, *v4.Endpoints[1].Conditions.Ready, "b is not ready")
	v6 := getSlice(t, client, SliceName("web", "node-a", corev1.IPv6Protocol))
	require.Len(t, v6.Endpoints, 1)
	assert.Equal(t, []string{"fd00:5::5"}, v6.Endpoints[0].Addresses)
	_, err = client.DiscoveryV1().EndpointSlices("shop").Get(ctx, stale.Name, metav1.GetOptions{})
	assert.True(t, isNotFound(err), "the previous run's slice of a Service gone is deleted")
	assert.Len(t, listSlices(t, client), 3, "ours (v4, v6) and node b's")

	// Nothing changed: nothing written.
	before := writes(client)
	require.NoError(t, pub.Publish(ctx, svcs, targets))
	assert.Equal(t, before, writes(client))

	// b becomes ready, a leaves: the v4 slice updated, the v6 slice deleted.
	targets = []Target{target("b", "web", true, "172.16.0.6"), targets[2]}
	require.NoError(t, pub.Publish(ctx, svcs, targets))
	v4 = getSlice(t, client, v4.Name)
	require.Len(t, v4.Endpoints, 1)
	assert.True(t, *v4.Endpoints[0].Conditions.Ready)
	assert.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "b", UID: "uid-b"}}, v4.OwnerReferences, "a's pod is no owner any more")
	_, err = client.DiscoveryV1().EndpointSlices("shop").Get(ctx, v6.Name, metav1.GetOptions{})
	assert.True(t, isNotFound(err))

	// A terminating target stays, serving but not ready.
	targets[0].Terminating = true
	require.NoError(t, pub.Publish(ctx, svcs, targets))
	c := getSlice(t, client, v4.Name).Endpoints[0].Conditions
	assert.Equal(t, [3]bool{false, true, true}, [3]bool{*c.Ready, *c.Serving, *c.Terminating})

	// Everything gone: only node b's slice stays.
	require.NoError(t, pub.Publish(ctx, nil, nil))
	require.Len(t, listSlices(t, client), 1)
	assert.Equal(t, theirs.Name, listSlices(t, client)[0].Name)
}

// A slice written meanwhile by someone else (a predecessor that did not
// list it, a conflict) is taken over; a publish that fails is tried again
// at the next one.
func TestPublisherRecovers(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	pub, err := NewPublisher(clientset{client}, proxyName, "node-a", WithLogger(testLogger(t)))
	require.NoError(t, err)
	svcs := []*corev1.Service{service("shop", "web", "10.96.0.10")}
	name := SliceName("web", "node-a", corev1.IPv4Protocol)
	// Created after the publisher listed: its create finds it.
	require.NoError(t, pub.Publish(ctx, nil, nil))
	_, err = client.DiscoveryV1().EndpointSlices("shop").Create(ctx, slice("shop", name, "web", discoveryv1.AddressTypeIPv4), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx, svcs, []Target{target("a", "web", true, "172.16.0.5")}))
	assert.Equal(t, []string{"172.16.0.5"}, getSlice(t, client, name).Endpoints[0].Addresses)

	// The API refuses writes: the error names the slice; the next publish
	// after it is back writes it.
	client.PrependReactor("update", "endpointslices", func(k8stesting.Action) (bool, runtimeObject, error) {
		return true, nil, kubefake.ErrAPIDown
	})
	err = pub.Publish(ctx, svcs, []Target{target("a", "web", true, "172.16.0.6")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "shop/"+name)
	client.ReactionChain = client.ReactionChain[1:]
	require.NoError(t, pub.Publish(ctx, svcs, []Target{target("a", "web", true, "172.16.0.6")}))
	assert.Equal(t, []string{"172.16.0.6"}, getSlice(t, client, name).Endpoints[0].Addresses)
}

// What the publisher writes, a source reads back as the Service's
// endpoints.
func TestPublishedSlicesServe(t *testing.T) {
	web := service("shop", "web", "10.96.0.10")
	client := fake.NewClientset(web)
	_, rec := start(t, client)
	pub, err := NewPublisher(clientset{client}, proxyName, "node-a", WithLogger(testLogger(t)))
	require.NoError(t, err)
	require.NoError(t, pub.Publish(context.Background(), []*corev1.Service{web},
		[]Target{target("a", "web", true, "172.16.0.5"), target("b", "web", false, "172.16.0.6")}))
	require.Eventually(t, func() bool {
		return equalAddrs(rec.endpoints()[spn("shop", "web", "http")], addrs("172.16.0.5:8080"))
	}, waitFor, 5*time.Millisecond)
}

func listSlices(t *testing.T, c *fake.Clientset) []discoveryv1.EndpointSlice {
	t.Helper()
	l, err := c.DiscoveryV1().EndpointSlices("").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	return l.Items
}
