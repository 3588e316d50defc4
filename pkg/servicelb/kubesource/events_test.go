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
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
)

// events lists the Events of namespace shop by reason.
func events(t *testing.T, c *fake.Clientset) map[string][]corev1.Event {
	t.Helper()
	l, err := c.CoreV1().Events("shop").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string][]corev1.Event{}
	for _, e := range l.Items {
		out[e.Reason] = append(out[e.Reason], e)
	}
	return out
}

// A cluster IP outside the service prefixes and a port the proxy cannot
// serve are refused with one Warning Event each on the Service, not
// repeated while the problem lasts; the rest of the Service is served.
func TestRefusalsAreEventsOnTheService(t *testing.T) {
	ctx := context.Background()
	web := service("shop", "web", "10.96.0.10", "fd00:96::10")
	web.Spec.Ports = append(web.Spec.Ports,
		corev1.ServicePort{Name: "sctp", Port: 9, Protocol: corev1.ProtocolSCTP},
		corev1.ServicePort{Name: "named", Port: 81, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web")})
	client := fake.NewClientset(web)
	_, rec := startWith(t, client, testLogger(t), WithPrefixes([]netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}), WithEvents("node-a"))

	require.Eventually(t, func() bool { return len(events(t, client)) == 2 }, waitFor, 5*time.Millisecond)
	ev := events(t, client)
	require.Len(t, ev[ReasonClusterIPNotServed], 1)
	require.Len(t, ev[ReasonPortNotServed], 2, "SCTP, and the named target port")
	e := ev[ReasonClusterIPNotServed][0]
	assert.Equal(t, corev1.EventTypeWarning, e.Type)
	assert.Equal(t, corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: "shop", Name: "web", UID: "uid-web"}, e.InvolvedObject)
	assert.Contains(t, e.Message, "fd00:96::10")
	assert.Equal(t, "node-a", e.Source.Host)
	ports := rec.ports()
	require.Len(t, ports, 2, "the IPv4 part, TCP ports")
	assert.Equal(t, addr("10.96.0.10"), ports[spn("shop", "web", "http")].IP)

	// An unrelated change of the Service: no new Event.
	web.Spec.Ports[0].Port = 8000
	_, err := client.CoreV1().Services("shop").Update(ctx, web, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rec.ports()[spn("shop", "web", "http")].Port == 8000 }, waitFor, 5*time.Millisecond)
	n := 0
	for _, l := range events(t, client) {
		n += len(l)
	}
	assert.Equal(t, 3, n, "deduplicated")
}

// A slice's trigger time counts once, when its value is new and later
// than the source's start (a relist brings back old values).
func TestNewTrigger(t *testing.T) {
	started := time.Now()
	at := func(d time.Duration) *discoveryv1.EndpointSlice {
		s := slice("shop", "web-a", "web", discoveryv1.AddressTypeIPv4)
		s.Annotations = map[string]string{TriggerTimeAnnotation: started.Add(d).UTC().Format(time.RFC3339Nano)}
		return s
	}
	later := at(time.Second)
	assert.True(t, newTrigger(nil, later, started).Equal(started.Add(time.Second)), "added after the start")
	assert.True(t, newTrigger(at(-time.Second), later, started).Equal(started.Add(time.Second)), "a new value")
	assert.True(t, newTrigger(later, later, started).IsZero(), "the same value again (a resync)")
	assert.True(t, newTrigger(nil, at(-time.Hour), started).IsZero(), "written before the start")
	assert.True(t, newTrigger(nil, slice("shop", "web-a", "web", discoveryv1.AddressTypeIPv4), started).IsZero(), "none")
}
