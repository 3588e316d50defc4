package registration_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-net/causeway/internal/registryfake"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/registration"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newFakeRegistry is a registry that grants a short expiration, knows only
// registered network services and refuses deadlines.
func newFakeRegistry() *registryfake.Registry {
	return registryfake.New(registryfake.WithExpiry(300*time.Millisecond), registryfake.RequireServices(),
		registryfake.RefuseDeadlines())
}

// setDown takes f down, or brings it back; coming back it has forgotten
// everything, as a restarted in-memory registry has.
func setDown(f *registryfake.Registry, down bool) {
	f.SetDown(down)
	if down {
		f.Forget()
	}
}

type changes struct {
	mu  sync.Mutex
	got []bool
}

func (c *changes) add(v bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, v)
}

func (c *changes) list() []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]bool(nil), c.got...)
}

func start(t *testing.T, f *registryfake.Registry, ch *changes, opts ...registration.Option) *registration.Keeper {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k, err := registration.Start(ctx,
		registration.Registrar{Service: f.Services(), Endpoint: f},
		&registry.NetworkService{Name: "svc"},
		&registry.NetworkServiceEndpoint{Name: "nse-1", NetworkServiceNames: []string{"svc"}},
		append([]registration.Option{registration.WithRetryBackoff(10*time.Millisecond, 50*time.Millisecond),
			registration.WithOnChange(ch.add)}, opts...)...)
	require.NoError(t, err)
	return k
}

// The registration is refreshed before it expires, survives a registry
// that is away for many refresh periods and comes back empty (the network
// service is registered again first), and is removed by Stop. The outage
// is one warning; the retries are debug lines, and its end says how many.
func TestKeepsRegisteredThroughAnOutage(t *testing.T) {
	f, ch := newFakeRegistry(), &changes{}
	var log testutil.JSONLog
	k := start(t, f, ch, registration.WithLogger(slog.New(slog.NewJSONHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	require.True(t, k.Registered())
	// Refreshed: registered after several granted lifetimes (a check at
	// one instant would fail whenever a busy machine delayed a refresh
	// past its expiry).
	require.Eventually(t, func() bool { return f.Counts().EndpointRegisters >= 4 && f.Registered("nse-1") },
		time.Minute, 10*time.Millisecond, "refreshed")

	setDown(f, true)
	require.Eventually(t, func() bool { return !k.Registered() }, time.Minute, 10*time.Millisecond)
	time.Sleep(2 * time.Second) // dozens of failed tries: the keeper does not give up
	setDown(f, false)
	require.Eventually(t, func() bool { return k.Registered() && f.Registered("nse-1") }, time.Minute, 10*time.Millisecond,
		"registered again once the registry is back")
	require.Equal(t, []bool{true, false, true}, ch.list())
	require.Equal(t, 1, log.Count("registration refresh failed, retrying until it succeeds"), log.String())
	require.Greater(t, log.Count("registration refresh failed again"), 5)
	restored, _ := log.Find(0, "registration restored")
	require.NotNil(t, restored)
	require.Greater(t, restored["failedTries"], float64(5))

	require.NoError(t, k.Stop(context.Background()))
	require.False(t, f.Registered("nse-1"), "unregistered on stop")
	require.NoError(t, k.Stop(context.Background()), "idempotent")
}

// The first registration is retried until the first timeout, then Start
// fails and leaves nothing running.
func TestFirstRegistrationTimesOut(t *testing.T) {
	f := newFakeRegistry()
	setDown(f, true)
	_, err := registration.Start(context.Background(),
		registration.Registrar{Service: f.Services(), Endpoint: f},
		&registry.NetworkService{Name: "svc"},
		&registry.NetworkServiceEndpoint{Name: "nse-1", NetworkServiceNames: []string{"svc"}},
		registration.WithFirstTimeout(200*time.Millisecond), registration.WithRetryBackoff(10*time.Millisecond, 20*time.Millisecond))
	require.ErrorContains(t, err, "register network service svc")
	require.Zero(t, f.Counts().EndpointRegisters, "the endpoint waits for its service")
}

func TestStartRefusesIncompleteArguments(t *testing.T) {
	_, err := registration.Start(context.Background(), registration.Registrar{}, nil, &registry.NetworkServiceEndpoint{Name: "x"})
	require.Error(t, err)
}

// WithoutFirstWait: Start returns at once while the registry is away; the
// keeper goes on trying, in the background, without end, and registers
// once the registry is back.
func TestWithoutFirstWaitRegistersInTheBackground(t *testing.T) {
	f, ch := newFakeRegistry(), &changes{}
	setDown(f, true)
	k, err := startInBackground(f, ch)
	require.NoError(t, err, "no wait, no failure")
	require.False(t, k.Registered())
	time.Sleep(time.Second) // dozens of failed tries: the keeper does not give up
	require.False(t, k.Registered())
	setDown(f, false)
	require.Eventually(t, func() bool { return k.Registered() && f.Registered("nse-1") }, time.Minute, 10*time.Millisecond)
	require.Equal(t, []bool{true}, ch.list())
	require.NoError(t, k.Stop(context.Background()))
}

// A keeper stopped before the registry ever accepted its endpoint (the
// proxy stopped while NSM was away since its start) has nothing to
// unregister, and does not try with no endpoint.
func TestStopBeforeAnyRegistration(t *testing.T) {
	f, ch := newFakeRegistry(), &changes{}
	setDown(f, true)
	k, err := startInBackground(f, ch)
	require.NoError(t, err)
	require.NoError(t, k.Stop(context.Background()))
	require.Zero(t, f.Counts().Unregisters, "nothing was registered, nothing to unregister")
	require.Empty(t, ch.list())
}

// startInBackground starts a keeper that does not wait for its first
// registration.
func startInBackground(f *registryfake.Registry, ch *changes) (*registration.Keeper, error) {
	return registration.Start(context.Background(),
		registration.Registrar{Service: f.Services(), Endpoint: f},
		&registry.NetworkService{Name: "svc"},
		&registry.NetworkServiceEndpoint{Name: "nse-1", NetworkServiceNames: []string{"svc"}},
		registration.WithoutFirstWait(),
		registration.WithRetryBackoff(10*time.Millisecond, 50*time.Millisecond),
		registration.WithOnChange(ch.add))
}

// servicesOwnedElsewhere refuses every network service registration, as
// NSM's registry policy does for a service that another identity
// registered first.
type servicesOwnedElsewhere struct {
	registry.NetworkServiceRegistryClient
}

func (servicesOwnedElsewhere) Register(context.Context, *registry.NetworkService, ...grpc.CallOption) (*registry.NetworkService, error) {
	return nil, status.Error(codes.PermissionDenied, "no sufficient privileges")
}

// A network service that another workload registered first (NSM's policy:
// with pod IDs, every proxy of a DaemonSet registers the same service) does
// not keep the endpoint out: it is registered, refreshed and removed on
// Stop, and the refusal is logged once. Without the service in the
// registry, the endpoint is not registered.
func TestServiceOfAnotherWorkload(t *testing.T) {
	f, ch := newFakeRegistry(), &changes{}
	_, err := f.Services().Register(context.Background(), &registry.NetworkService{Name: "svc"})
	require.NoError(t, err, "the first pod's registration")
	var log testutil.JSONLog
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k, err := registration.Start(ctx,
		registration.Registrar{Service: servicesOwnedElsewhere{f.Services()}, Endpoint: f},
		&registry.NetworkService{Name: "svc"},
		&registry.NetworkServiceEndpoint{Name: "nse-2", NetworkServiceNames: []string{"svc"}},
		registration.WithRetryBackoff(10*time.Millisecond, 50*time.Millisecond), registration.WithOnChange(ch.add),
		registration.WithLogger(slog.New(slog.NewJSONHandler(&log, nil))))
	require.NoError(t, err)
	require.True(t, k.Registered())
	require.Eventually(t, func() bool { return f.Counts().EndpointRegisters >= 3 && f.Registered("nse-2") },
		time.Minute, 10*time.Millisecond, "refreshed")
	require.Equal(t, 1, log.Count("the registry keeps the network service to the workload that registered it first; registering the endpoint only"), log.String())
	require.NoError(t, k.Stop(context.Background()))
	require.False(t, f.Registered("nse-2"))

	empty := newFakeRegistry()
	_, err = registration.Start(context.Background(),
		registration.Registrar{Service: servicesOwnedElsewhere{empty.Services()}, Endpoint: empty},
		&registry.NetworkService{Name: "svc"},
		&registry.NetworkServiceEndpoint{Name: "nse-2", NetworkServiceNames: []string{"svc"}},
		registration.WithFirstTimeout(200*time.Millisecond), registration.WithRetryBackoff(10*time.Millisecond, 20*time.Millisecond))
	require.ErrorContains(t, err, "register endpoint nse-2", "a refused service that does not exist keeps the endpoint out")
}
