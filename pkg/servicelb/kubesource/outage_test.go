package kubesource

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/causeway-net/causeway/pkg/servicelb/kubesource/kubefake"
)

// warnings counts the records at warning level.
type warnings struct {
	slog.Handler
	n *atomic.Int64
}

func (w warnings) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		w.n.Add(1)
	}
	return w.Handler.Handle(ctx, r)
}

func (w warnings) WithAttrs(a []slog.Attr) slog.Handler { return warnings{w.Handler.WithAttrs(a), w.n} }

// While the API server is away the last known services and endpoints stay
// (no delivery empties them, whatever the reflector's retries); the outage
// is one warning and one count; on its return the sources resync and take
// what changed meanwhile.
func TestAPIServerOutageKeepsLastState(t *testing.T) {
	client := fake.NewClientset(service("shop", "web", "10.96.0.10"),
		slice("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, ep("172.16.0.5", true, true, false)))
	api := kubefake.NewFlaky(client)
	var warned atomic.Int64
	src, rec := startWith(t, client, slog.New(warnings{testLogger(t).Handler(), &warned}))
	web := spn("shop", "web", "http")
	require.Equal(t, addrs("172.16.0.5:8080"), rec.endpoints()[web])

	api.GoDown()
	// Several failed retries of both informers: one outage.
	require.Eventually(t, func() bool { return api.Failures() >= 4 }, waitFor, 10*time.Millisecond)
	st := src.Stats()
	assert.True(t, st.APIServerAway)
	assert.Equal(t, uint64(1), st.Outages)
	assert.Equal(t, int64(1), warned.Load(), "one warning for the outage")
	assert.Contains(t, rec.ports(), web, "the last known service stays")
	assert.Equal(t, addrs("172.16.0.5:8080"), rec.endpoints()[web], "and its endpoints")

	// Changed while away (written to the store behind the API's back).
	_, err := client.CoreV1().Services("shop").Create(context.Background(), service("shop", "late", "10.96.0.11"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.DiscoveryV1().EndpointSlices("shop").Update(context.Background(),
		slice("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, ep("172.16.0.6", true, true, false)), metav1.UpdateOptions{})
	require.NoError(t, err)

	api.SetDown(false)
	require.Eventually(t, func() bool {
		_, ok := rec.ports()[spn("shop", "late", "http")]
		return ok && equalAddrs(rec.endpoints()[web], addrs("172.16.0.6:8080"))
	}, waitFor, 10*time.Millisecond, "resynced on return")
	require.Eventually(t, func() bool { return !src.Stats().APIServerAway }, waitFor, 10*time.Millisecond)
	assert.Equal(t, uint64(1), src.Stats().Outages)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Zero(t, rec.emptySvcs, "no delivery ever emptied the services")
}

// A source started while the API server is away delivers nothing (not an
// empty list) until it has listed once.
func TestNoDeliveryBeforeFirstSync(t *testing.T) {
	client := fake.NewClientset(service("shop", "web", "10.96.0.10"))
	api := kubefake.NewFlaky(client)
	api.SetDown(true)
	rec := &recorder{}
	src, err := New(clientset{client}, proxyName, node, rec, WithLogger(testLogger(t)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); src.Run(ctx) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return api.Failures() >= 2 }, waitFor, 10*time.Millisecond)
	st := src.Stats()
	assert.False(t, st.Synced)
	assert.Zero(t, st.Deliveries)
	assert.Equal(t, uint64(1), st.Outages)

	api.SetDown(false)
	require.Eventually(t, func() bool { return len(rec.ports()) == 1 }, waitFor, 10*time.Millisecond)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Zero(t, rec.emptySvcs)
}
