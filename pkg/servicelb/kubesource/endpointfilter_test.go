package kubesource

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/causeway-net/causeway/internal/limits"
	"github.com/causeway-net/causeway/internal/testutil"
)

// TestForgedSliceEndpointsIgnored performs the attack of finding 3: a slice
// with the right labels, written by someone who may write slices, points
// a Service at the proxy's loopback, a cloud metadata address, the pod
// network and an IPv6 link-local address. Only the endpoint inside the
// conduit's pools is served; each refused address is logged once, however
// often the slice changes.
func TestForgedSliceEndpointsIgnored(t *testing.T) {
	ctx := context.Background()
	forged := func(extra ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		eps := append([]discoveryv1.Endpoint{
			ep("127.0.0.1", true, true, false), ep("169.254.169.254", true, true, false),
			ep("10.244.0.9", true, true, false), ep("172.16.0.5", true, true, false),
		}, extra...)
		return slice("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, eps...)
	}
	client := fake.NewClientset(service("shop", "web", "10.96.0.10"), forged())
	log := &testutil.JSONLog{}
	_, rec := startWith(t, client, slog.New(slog.NewJSONHandler(log, nil)),
		WithEndpointPools([]netip.Prefix{netip.MustParsePrefix("172.16.0.0/16"), netip.MustParsePrefix("fd00::/48")}))
	web := spn("shop", "web", "http")
	require.Equal(t, addrs("172.16.0.5:8080"), rec.endpoints()[web], "only the endpoint inside the conduit's pools")

	// The slice changes (a new legitimate endpoint): the refused ones are
	// not logged again.
	_, err := client.DiscoveryV1().EndpointSlices("shop").Update(ctx, forged(ep("172.16.1.5", true, true, false)), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return equalAddrs(rec.endpoints()[web], addrs("172.16.0.5:8080", "172.16.1.5:8080")) },
		waitFor, 5*time.Millisecond)
	require.Equal(t, 3, log.Count("endpoint ignored"), "each refused address logged once:\n%s", log.String())
	for _, why := range []string{"loopback", "link-local (a metadata service)", "outside the conduit's pools"} {
		line, _ := log.Find(0, "endpoint ignored", "reason", why)
		require.NotNil(t, line, "a refusal for %s", why)
	}
}

// TestEndpointFilterWithoutPools: without pools, only the addresses no
// target can have are refused.
func TestEndpointFilterWithoutPools(t *testing.T) {
	f := newEndpointFilter(nil, discard)
	for a, ok := range map[string]bool{"10.244.0.9": true, "fd00::5": true, "127.0.0.2": false, "::1": false,
		"169.254.169.254": false, "fe80::1": false, "224.0.0.1": false, "0.0.0.0": false} {
		require.Equal(t, ok, f.refusal(netip.MustParseAddr(a)) == "", a)
	}
}

// TestServicesPerConduitBounded performs the attack of finding 4 on the
// source: Services attached to the conduit without end. Past the bound a
// new Service is not served, counted and logged once; when one goes, the
// refused one is served at its next change.
func TestServicesPerConduitBounded(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(service("shop", "web-0", "10.96.0.10"), service("shop", "web-1", "10.96.0.11"))
	log := &testutil.JSONLog{}
	lg := slog.New(slog.NewJSONHandler(log, nil))
	refusals := limits.New("test", lg)
	_, rec := startWith(t, client, lg, WithMaxServices(2, refusals))
	api := client.CoreV1().Services("shop")
	for i := 2; i < 6; i++ {
		_, err := api.Create(ctx, service("shop", fmt.Sprintf("web-%d", i), fmt.Sprintf("10.96.0.%d", 10+i)), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// A refusal is counted before it is logged: wait for both.
	const refused = "limit reached: request refused (logged once per cause)"
	require.Eventually(t, func() bool { return refusals.Count("services_per_conduit") >= 4 && log.Count(refused) >= 4 },
		waitFor, 5*time.Millisecond)
	require.Len(t, rec.ports(), 2, "two Services served")
	require.Equal(t, 4, log.Count(refused), "once per Service")

	require.NoError(t, api.Delete(ctx, "web-0", metav1.DeleteOptions{}))
	again := service("shop", "web-2", "10.96.0.12")
	again.Labels["touched"] = "yes"
	_, err := api.Update(ctx, again, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := rec.ports()[spn("shop", "web-2", "http")]; return ok }, waitFor, 5*time.Millisecond)
	require.Len(t, rec.ports(), 2)
}

// TestOptInNamespaces: with an opt-in list, a Service labelled for the
// conduit in another namespace (and its slices) is not served.
func TestOptInNamespaces(t *testing.T) {
	client := fake.NewClientset(service("shop", "web", "10.96.0.10"), service("intruder", "dns", "10.96.0.53"),
		slice("intruder", "dns-a", "dns", discoveryv1.AddressTypeIPv4, ep("172.16.0.9", true, true, false)))
	_, rec := startWith(t, client, discard, WithNamespaces([]string{"shop"}))
	require.Eventually(t, func() bool { return len(rec.ports()) == 1 }, waitFor, 5*time.Millisecond)
	_, ok := rec.ports()[spn("shop", "web", "http")]
	require.True(t, ok)
	require.Empty(t, rec.endpoints()[spn("intruder", "dns", "http")])
}
