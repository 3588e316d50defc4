package proxy

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/clientproof"
	"github.com/causeway-net/causeway/pkg/nsm/clientproof/clientprooftest"
)

// tokenOf is a target connection claiming pod whose first segment carries
// tok.
func tokenOf(segID, pod, tok string) *networkservice.Connection {
	c := targetConn(segID)
	c.Labels = map[string]string{PodNameLabel: pod}
	c.GetPath().GetPathSegments()[0].Token = tok
	return c
}

// TestTargetIdentityProved performs the attack of finding 1 on the proxy:
// a target claims another team's pod, with its own SVID's token and with
// a token whose subject names the victim. The proxy records as the
// target's identity only what the token's certificate proves (the
// attacker's ID, or none), so the publisher cannot be led to the victim's
// pod, and a forged subject does not fill the victim's connection quota;
// with a conduit's list of allowed IDs, the attacker is refused with
// PermissionDenied before any address is allocated, counted and logged
// once, while the victim connects.
func TestTargetIdentityProved(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "example.org")
	attacker := ca.Mint(t, "/ns/team-a/pod/attacker")
	victim := ca.Mint(t, "/ns/team-b/pod/web-0")
	prover := clientproof.NewProver(attacker.Bundle)
	genuine := func(src *testutil.SVIDSource) string {
		tok, _, err := clientproof.Generator(src, time.Minute)(nil)
		require.NoError(t, err)
		return tok
	}
	ctx := context.Background()

	e := newTestEnv(t, func(c *Config) { c.TargetIdentity.Prove = prover.Client; c.MaxConnectionsPerClient = 2 })
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("a-1", "web-0", genuine(attacker)), TargetConn))
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("a-2", "web-0", clientprooftest.ForgeOwn(t, attacker.SVID, victim.SVID.ID.String())), TargetConn))
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("a-3", "web-0", clientprooftest.ForgeOwn(t, attacker.SVID, victim.SVID.ID.String())), TargetConn))
	// The forged subject fills no quota but that of unproved claims of it:
	// the victim (limit 2) still connects twice.
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("v-1", "web-0", genuine(victim)), TargetConn))
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("v-2", "web-0", genuine(victim)), TargetConn))
	ids := map[string]string{}
	for _, tg := range e.p.Targets() {
		require.Equal(t, "web-0", tg.Client.Pod, "the claim is kept as it is")
		ids[tg.Key] = tg.Client.Identity
	}
	require.Equal(t, map[string]string{
		"a-1": "spiffe://example.org/ns/team-a/pod/attacker",
		"a-2": "", // the forged subject is not proved
		"a-3": "",
		"v-1": "spiffe://example.org/ns/team-b/pod/web-0",
		"v-2": "spiffe://example.org/ns/team-b/pod/web-0",
	}, ids)

	log := &testutil.JSONLog{}
	allowed := func(id spiffeid.ID) error {
		if !strings.HasPrefix(id.Path(), "/ns/team-b/") {
			return errors.New("not of namespace team-b")
		}
		return nil
	}
	e = newTestEnv(t, func(c *Config) {
		c.TargetIdentity = TargetIdentity{Prove: prover.Client, Allowed: allowed}
		c.Logger = slog.New(slog.NewJSONHandler(log, nil))
	})
	for range 3 {
		err := e.p.SetIPContext(ctx, tokenOf("a-1", "web-0", genuine(attacker)), TargetConn)
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
		require.ErrorContains(t, err, "not of namespace team-b")
		err = e.p.SetIPContext(ctx, tokenOf("a-2", "web-0", clientprooftest.ForgeOwn(t, attacker.SVID, victim.SVID.ID.String())), TargetConn)
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
		require.ErrorContains(t, err, "not proved")
	}
	for _, c := range e.ipam.children() {
		require.NotContains(t, c, "a-", "nothing allocated for a refused client")
	}
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("v-1", "web-0", genuine(victim)), TargetConn))
	require.Len(t, e.p.Targets(), 1)
	require.Equal(t, 3, e.p.idRefusals.Count("not_allowed"))
	require.Equal(t, 3, e.p.idRefusals.Count("unproved"))
	require.Equal(t, 2, log.Count("target connection refused for its client's identity (logged once per client)"))
}
