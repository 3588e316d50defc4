package registration_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/registration"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeRegistry grants a short expiration and can be taken down; while down
// every call fails, and coming back it has forgotten everything, as a
// restarted in-memory registry does.
type fakeRegistry struct {
	mu       sync.Mutex
	down     bool
	services map[string]bool
	nses     map[string]time.Time
	calls    int
	// unregisters counts the Unregister calls.
	unregisters int
}

func newFakeRegistry() *fakeRegistry {
	return &fakeRegistry{services: map[string]bool{}, nses: map[string]time.Time{}}
}

var errDown = errors.New("registry is down")

func (f *fakeRegistry) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
	if down {
		f.services, f.nses = map[string]bool{}, map[string]time.Time{}
	}
}

func (f *fakeRegistry) registered(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	exp, ok := f.nses[name]
	return ok && time.Now().Before(exp)
}

type serviceClient struct {
	registry.NetworkServiceRegistryClient // Find and Unregister are not used
	*fakeRegistry
}

func (s serviceClient) Register(_ context.Context, ns *registry.NetworkService, _ ...grpc.CallOption) (*registry.NetworkService, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, errDown
	}
	s.services[ns.GetName()] = true
	return ns, nil
}

type endpointClient struct {
	registry.NetworkServiceEndpointRegistryClient // Find is not used
	*fakeRegistry
}

func (e endpointClient) Register(ctx context.Context, nse *registry.NetworkServiceEndpoint, _ ...grpc.CallOption) (*registry.NetworkServiceEndpoint, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	if _, ok := ctx.Deadline(); ok {
		// NSM's expire element would take it off the granted expiration.
		return nil, errors.New("a registration must not carry a deadline")
	}
	if e.down {
		return nil, errDown
	}
	for _, s := range nse.GetNetworkServiceNames() {
		if !e.services[s] {
			return nil, errors.New("unknown network service " + s)
		}
	}
	exp := time.Now().Add(300 * time.Millisecond)
	e.nses[nse.GetName()] = exp
	nse.ExpirationTime = timestamppb.New(exp)
	return nse, nil
}

func (e endpointClient) Unregister(_ context.Context, nse *registry.NetworkServiceEndpoint, _ ...grpc.CallOption) (*emptypb.Empty, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.unregisters++
	if nse == nil {
		// The SDK's registry client chain dereferences it (sendfd).
		return nil, errors.New("unregister of no endpoint")
	}
	if e.down {
		return nil, errDown
	}
	delete(e.nses, nse.GetName())
	return &emptypb.Empty{}, nil
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

func start(t *testing.T, f *fakeRegistry, ch *changes, opts ...registration.Option) *registration.Keeper {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k, err := registration.Start(ctx,
		registration.Registrar{Service: serviceClient{fakeRegistry: f}, Endpoint: endpointClient{fakeRegistry: f}},
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
	time.Sleep(time.Second) // three granted lifetimes
	require.True(t, f.registered("nse-1"), "refreshed before each expiry")

	f.setDown(true)
	require.Eventually(t, func() bool { return !k.Registered() }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(2 * time.Second) // dozens of failed tries: the keeper does not give up
	f.setDown(false)
	require.Eventually(t, func() bool { return k.Registered() && f.registered("nse-1") }, 5*time.Second, 10*time.Millisecond,
		"registered again once the registry is back")
	require.Equal(t, []bool{true, false, true}, ch.list())
	require.Equal(t, 1, log.Count("registration refresh failed, retrying until it succeeds"), log.String())
	require.Greater(t, log.Count("registration refresh failed again"), 5)
	restored, _ := log.Find(0, "registration restored")
	require.NotNil(t, restored)
	require.Greater(t, restored["failedTries"], float64(5))

	require.NoError(t, k.Stop(context.Background()))
	require.False(t, f.registered("nse-1"), "unregistered on stop")
	require.NoError(t, k.Stop(context.Background()), "idempotent")
}

// The first registration is retried until the first timeout, then Start
// fails and leaves nothing running.
func TestFirstRegistrationTimesOut(t *testing.T) {
	f := newFakeRegistry()
	f.setDown(true)
	_, err := registration.Start(context.Background(),
		registration.Registrar{Service: serviceClient{fakeRegistry: f}, Endpoint: endpointClient{fakeRegistry: f}},
		&registry.NetworkService{Name: "svc"},
		&registry.NetworkServiceEndpoint{Name: "nse-1", NetworkServiceNames: []string{"svc"}},
		registration.WithFirstTimeout(200*time.Millisecond), registration.WithRetryBackoff(10*time.Millisecond, 20*time.Millisecond))
	require.ErrorContains(t, err, "register network service svc")
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Zero(t, f.calls, "the endpoint waits for its service")
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
	f.setDown(true)
	k, err := startInBackground(f, ch)
	require.NoError(t, err, "no wait, no failure")
	require.False(t, k.Registered())
	time.Sleep(time.Second) // dozens of failed tries: the keeper does not give up
	require.False(t, k.Registered())
	f.setDown(false)
	require.Eventually(t, func() bool { return k.Registered() && f.registered("nse-1") }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, []bool{true}, ch.list())
	require.NoError(t, k.Stop(context.Background()))
}

// A keeper stopped before the registry ever accepted its endpoint (the
// proxy stopped while NSM was away since its start) has nothing to
// unregister, and does not try with no endpoint.
func TestStopBeforeAnyRegistration(t *testing.T) {
	f, ch := newFakeRegistry(), &changes{}
	f.setDown(true)
	k, err := startInBackground(f, ch)
	require.NoError(t, err)
	require.NoError(t, k.Stop(context.Background()))
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Zero(t, f.unregisters, "nothing was registered, nothing to unregister")
	require.Empty(t, ch.list())
}

// startInBackground starts a keeper that does not wait for its first
// registration.
func startInBackground(f *fakeRegistry, ch *changes) (*registration.Keeper, error) {
	return registration.Start(context.Background(),
		registration.Registrar{Service: serviceClient{fakeRegistry: f}, Endpoint: endpointClient{fakeRegistry: f}},
		&registry.NetworkService{Name: "svc"},
		&registry.NetworkServiceEndpoint{Name: "nse-1", NetworkServiceNames: []string{"svc"}},
		registration.WithoutFirstWait(),
		registration.WithRetryBackoff(10*time.Millisecond, 50*time.Millisecond),
		registration.WithOnChange(ch.add))
}
