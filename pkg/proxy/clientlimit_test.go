package proxy

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/testutil"
)

// signedBy is a target connection whose first path segment carries a
// token with the subject sub (its signature is not the proxy's to check).
func signedBy(segID, sub string) *networkservice.Connection {
	c := targetConn(segID)
	claims := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"` + sub + `"}`))
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256"}`))
	c.GetPath().GetPathSegments()[0].Token = header + "." + claims + ".sig"
	return c
}

// TestConnectionsPerClientBounded performs the attack of finding 4 on the
// proxy: one client opens connections under ids it chooses, to empty its
// node's subnet. Past the limit each new id is refused with
// ResourceExhausted, counted and logged once; another client is not
// affected, and the greedy client's own connections still refresh.
func TestConnectionsPerClientBounded(t *testing.T) {
	log := &testutil.JSONLog{}
	e := newTestEnv(t, func(c *Config) {
		c.MaxConnectionsPerClient = 3
		c.Logger = slog.New(slog.NewJSONHandler(log, nil))
	})
	ctx := context.Background()
	greedy := "spiffe://example.org/ns/team-b/sa/greedy"
	for i := range 3 {
		require.NoError(t, e.p.SetIPContext(ctx, signedBy(fmt.Sprintf("g-%d", i), greedy), TargetConn))
	}
	for i := 3; i < 8; i++ {
		err := e.p.SetIPContext(ctx, signedBy(fmt.Sprintf("g-%d", i), greedy), TargetConn)
		require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
		require.ErrorContains(t, err, greedy)
	}
	require.NoError(t, e.p.SetIPContext(ctx, signedBy("g-0", greedy), TargetConn), "a refresh is no new connection")
	require.NoError(t, e.p.SetIPContext(ctx, signedBy("other-0", "spiffe://example.org/ns/team-a/sa/web"), TargetConn))

	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(e.p))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var refused float64
	for _, mf := range mfs {
		if mf.GetName() == "causeway_proxy_limit_refusals_total" {
			refused = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	require.Equal(t, 5.0, refused)
	require.Equal(t, 5, e.p.refusals.Count("connections_per_client"))
	require.Equal(t, 1, log.Count("limit reached: request refused (logged once per cause)"))

	// Unsigned tokens (plain local use) all carry one subject: it is not
	// taken as the client's identity.
	unsigned := targetConn("u-0")
	unsigned.GetPath().GetPathSegments()[0].Token = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"`+greedy+`"}`)) + "."
	require.NoError(t, e.p.SetIPContext(ctx, unsigned, TargetConn))
}

// TestRacingConnectionsBounded: two new connections of one client that
// race for its last place (both asked for while neither is allocated yet)
// are not both admitted: one is refused with ResourceExhausted before it
// reaches the IPAM, the other connects once its allocation ends, and the
// client holds exactly its limit. Before, each counted only the
// connections already allocated, and both passed.
func TestRacingConnectionsBounded(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.MaxConnectionsPerClient = 2 })
	ctx := context.Background()
	greedy := "spiffe://example.org/ns/team-b/sa/greedy"
	require.NoError(t, e.p.SetIPContext(ctx, signedBy("g-0", greedy), TargetConn))

	entered := make(chan string, 8)
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open)
	e.ipam.setHook(func(ctx context.Context, m string, c *ipamv1.Child) error {
		if m != "Allocate" || !strings.HasPrefix(c.GetName(), "race-") {
			return nil
		}
		entered <- c.GetName()[:len("race-1")]
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	results := make(chan error, 2)
	for _, id := range []string{"race-1", "race-2"} {
		go func() { results <- e.p.SetIPContext(ctx, signedBy(id, greedy), TargetConn) }()
	}
	reached := map[string]bool{}
	var refused error
	for refused == nil {
		select {
		case conn := <-entered:
			reached[conn] = true
			require.Len(t, reached, 1, "both racing connections passed the limit and reached the IPAM")
		case refused = <-results:
			require.Equal(t, codes.ResourceExhausted, status.Code(refused), "%v", refused)
		}
	}
	open()
	require.NoError(t, <-results)
	n := 0
	for _, tg := range e.p.Targets() {
		if strings.HasPrefix(tg.Key, "g-") || strings.HasPrefix(tg.Key, "race-") {
			n++
		}
	}
	require.Equal(t, 2, n)
	require.Equal(t, 1, e.p.refusals.Count("connections_per_client"))
	require.NoError(t, e.p.SetIPContext(ctx, signedBy("g-0", greedy), TargetConn), "a refresh is no new connection")
}
