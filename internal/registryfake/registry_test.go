package registryfake

import (
	"context"
	"testing"
	"time"

	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/stretchr/testify/require"
)

func TestWatchSeesChangesUntilDown(t *testing.T) {
	ctx := t.Context()
	r := New()
	_, err := r.Register(ctx, &registryapi.NetworkServiceEndpoint{Name: "a"})
	require.NoError(t, err)
	w, err := r.Find(ctx, &registryapi.NetworkServiceEndpointQuery{Watch: true})
	require.NoError(t, err)
	ev, err := w.Recv()
	require.NoError(t, err)
	require.Equal(t, "a", ev.GetNetworkServiceEndpoint().GetName(), "the listing")
	_, err = r.Unregister(ctx, &registryapi.NetworkServiceEndpoint{Name: "a"})
	require.NoError(t, err)
	ev, err = w.Recv()
	require.NoError(t, err)
	require.True(t, ev.GetDeleted())

	r.SetDown(true)
	_, err = w.Recv()
	require.Error(t, err, "the watch breaks")
	_, err = r.Find(ctx, &registryapi.NetworkServiceEndpointQuery{})
	require.ErrorIs(t, err, ErrDown)
	_, err = r.Register(ctx, &registryapi.NetworkServiceEndpoint{Name: "b"})
	require.ErrorIs(t, err, ErrDown)
	require.Equal(t, Counts{EndpointRegisters: 2, Unregisters: 1, Watches: 1}, r.Counts())
}

func TestStrictRegistry(t *testing.T) {
	r := New(WithExpiry(time.Hour), RequireServices(), RefuseDeadlines())
	nse := &registryapi.NetworkServiceEndpoint{Name: "a", NetworkServiceNames: []string{"svc"}}
	_, err := r.Register(t.Context(), nse)
	require.Error(t, err, "unknown network service")
	_, err = r.Services().Register(t.Context(), &registryapi.NetworkService{Name: "svc"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err = r.Register(ctx, nse)
	require.Error(t, err, "a deadline")
	got, err := r.Register(t.Context(), nse)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Hour), got.GetExpirationTime().AsTime(), time.Minute)
	require.True(t, r.Registered("a"))

	r.Forget()
	require.False(t, r.Registered("a"))
}
