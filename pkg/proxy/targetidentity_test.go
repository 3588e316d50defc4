package proxy

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/causeway-net/causeway/pkg/spiffeauthz"
)

// genuineToken is a token of src's own, as its client's Generator signs it.
func genuineToken(t testing.TB, src *testutil.SVIDSource) string {
	t.Helper()
	tok, _, err := clientproof.Generator(src, time.Minute)(nil)
	require.NoError(t, err)
	return tok
}

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
	ctx := context.Background()

	e := newTestEnv(t, func(c *Config) { c.TargetIdentity.Prove = prover.Client; c.MaxConnectionsPerClient = 2 })
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("a-1", "web-0", genuineToken(t, attacker)), TargetConn))
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("a-2", "web-0", clientprooftest.ForgeOwn(t, attacker.SVID, victim.SVID.ID.String())), TargetConn))
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("a-3", "web-0", clientprooftest.ForgeOwn(t, attacker.SVID, victim.SVID.ID.String())), TargetConn))
	// The forged subject fills no quota but that of unproved claims of it:
	// the victim (limit 2) still connects twice.
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("v-1", "web-0", genuineToken(t, victim)), TargetConn))
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("v-2", "web-0", genuineToken(t, victim)), TargetConn))
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
		err := e.p.SetIPContext(ctx, tokenOf("a-1", "web-0", genuineToken(t, attacker)), TargetConn)
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
		require.ErrorContains(t, err, "not of namespace team-b")
		err = e.p.SetIPContext(ctx, tokenOf("a-2", "web-0", clientprooftest.ForgeOwn(t, attacker.SVID, victim.SVID.ID.String())), TargetConn)
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
		require.ErrorContains(t, err, "not proved")
	}
	for _, c := range e.ipam.children() {
		require.NotContains(t, c, "a-", "nothing allocated for a refused client")
	}
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("v-1", "web-0", genuineToken(t, victim)), TargetConn))
	require.Len(t, e.p.Targets(), 1)
	require.Equal(t, 3, e.p.idRefusals.Count("not_allowed"))
	require.Equal(t, 3, e.p.idRefusals.Count("unproved"))
	require.Equal(t, 2, log.Count("target connection refused for its client's identity (logged once per client)"))
}

// TestReplayedTokenRefused performs the replay of a captured token on the
// proxy: a victim's genuine token, which NSM's policies pass when another
// caller puts it first in a path of its own
// (TestCapturedTokenPassesNSMAuthorization), is presented for the
// attacker's client connection while the victim's is open, and again for
// either once the victim's has closed. Both are refused with
// PermissionDenied before any address is allocated, counted as replayed
// and logged once per client, even with no list of allowed IDs; the
// victim's own connection, requested again with the same token (as its
// NSMgr does), is served, and so is its next connection with a new token.
func TestReplayedTokenRefused(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "example.org")
	victim := ca.Mint(t, "/ns/team-b/pod/web-0")
	prover := clientproof.NewProver(victim.Bundle)
	tok := genuineToken(t, victim)
	ctx := context.Background()
	log := &testutil.JSONLog{}
	e := newTestEnv(t, func(c *Config) {
		c.TargetIdentity = TargetIdentity{Prove: prover.Client, End: prover.End}
		c.Logger = slog.New(slog.NewJSONHandler(log, nil))
	})

	victimConn := tokenOf("v-1", "web-0", tok)
	require.NoError(t, e.p.SetIPContext(ctx, victimConn, TargetConn))
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("v-1", "web-0", tok), TargetConn), "the same request again")
	replay := func(key string) {
		t.Helper()
		err := e.p.SetIPContext(ctx, tokenOf(key, "web-0", tok), TargetConn)
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
		require.ErrorContains(t, err, clientproof.ErrReplayed.Error())
	}
	replay("attacker-1")
	require.NoError(t, e.p.UnsetIPContext(ctx, victimConn, TargetConn))
	replay("attacker-1")
	replay("v-1")
	for _, c := range e.ipam.children() {
		require.NotContains(t, c, "attacker-", "nothing allocated for a replay")
	}
	require.Empty(t, e.p.Targets())
	require.Zero(t, e.p.Stats().ReleasesCancelled, "a replay under the closed key cancels no release")

	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("v-1", "web-0", genuineToken(t, victim)), TargetConn))
	require.Len(t, e.p.Targets(), 1)
	require.Equal(t, "spiffe://example.org/ns/team-b/pod/web-0", e.p.Targets()[0].Client.Identity)
	require.Equal(t, 3, e.p.idRefusals.Count("replayed"))
	require.Equal(t, 1, log.Count("target connection refused for its client's identity (logged once per client)"))
}

// TestConnectionNotTakenOver performs a takeover of a target's connection:
// another client requests under the key of the victim's connection (the
// id of its path's first segment, which a client chooses; the lab's stubs
// derive it from their name), with its own genuine token and with a
// forged one. Both are refused with PermissionDenied and counted as
// "taken"; the victim keeps its addresses and its identity, also while
// its closed connection's addresses wait for their release.
func TestConnectionNotTakenOver(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "example.org")
	attacker := ca.Mint(t, "/ns/team-a/pod/attacker")
	victim := ca.Mint(t, "/ns/team-b/pod/web-0")
	prover := clientproof.NewProver(victim.Bundle)
	ctx := context.Background()
	e := newTestEnv(t, func(c *Config) { c.TargetIdentity = TargetIdentity{Prove: prover.Client, End: prover.End} })

	victimConn := tokenOf("v-1", "web-0", genuineToken(t, victim))
	require.NoError(t, e.p.SetIPContext(ctx, victimConn, TargetConn))
	held := ipcOf(victimConn).GetSrcIpAddrs()
	require.NotEmpty(t, held)
	takeOver := func() {
		t.Helper()
		for _, tok := range []string{genuineToken(t, attacker), clientprooftest.ForgeOwn(t, attacker.SVID, victim.SVID.ID.String())} {
			conn := tokenOf("v-1", "web-0", tok)
			err := e.p.SetIPContext(ctx, conn, TargetConn)
			require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
			require.ErrorContains(t, err, "held by spiffe://example.org/ns/team-b/pod/web-0")
			require.Empty(t, ipcOf(conn).GetSrcIpAddrs(), "no address handed out")
		}
	}
	takeOver()
	require.Len(t, e.p.Targets(), 1)
	require.Equal(t, "spiffe://example.org/ns/team-b/pod/web-0", e.p.Targets()[0].Client.Identity)

	require.NoError(t, e.p.UnsetIPContext(ctx, victimConn, TargetConn))
	takeOver()
	again := tokenOf("v-1", "web-0", genuineToken(t, victim))
	require.NoError(t, e.p.SetIPContext(ctx, again, TargetConn), "the victim reconnects within the release delay")
	require.Equal(t, held, ipcOf(again).GetSrcIpAddrs(), "with its addresses")
	require.Equal(t, 4, e.p.idRefusals.Count("taken"))
}

// chartTargets are the rules the chart renders for a conduit that lists no
// targetIDs, in a release of namespace red (deployments/helmtest
// TestTargetIDsDenyByDefault), and everyNamespace the patterns an operator
// lists to admit the targets of every namespace.
const (
	chartTargets   = "/ns/red/pod/*,/ns/red/sa/*"
	everyNamespace = "/ns/*/pod/*,/ns/*/sa/*"
)

// TestTargetsOfOtherNamespacesDeniedByDefault: under the chart's default
// rules (spiffeauthz.IDCheck, as the daemon builds them) the targets of the
// release's namespace connect in both ID forms, and a target of another
// namespace, a proxy's per-node ID and an unproved client are refused with
// PermissionDenied before any address is allocated: each refusal counted,
// and logged once per client naming its ID and why each rule missed it.
// The patterns of every namespace admit the other namespace's target, not
// the per-node ID nor the unproved client.
func TestTargetsOfOtherNamespacesDeniedByDefault(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "example.org")
	byPod := ca.Mint(t, "/ns/red/pod/web-0")
	byAccount := ca.Mint(t, "/ns/red/sa/web")
	other := ca.Mint(t, "/ns/blue/pod/web-0")
	proxyID := ca.Mint(t, "/ns/red/sa/proxy-trench-a/node/worker-1")
	ctx := context.Background()
	own := func() spiffeid.TrustDomain { return spiffeid.RequireTrustDomainFromString("example.org") }
	env := func(rules string) (*testEnv, *testutil.JSONLog) {
		allowed, err := spiffeauthz.IDCheck(strings.Split(rules, ","), own)
		require.NoError(t, err)
		prover := clientproof.NewProver(byPod.Bundle)
		log := &testutil.JSONLog{}
		return newTestEnv(t, func(c *Config) {
			c.TargetIdentity = TargetIdentity{Prove: prover.Client, Allowed: allowed, End: prover.End}
			c.Logger = slog.New(slog.NewJSONHandler(log, nil))
		}), log
	}
	const refusedMsg = "target connection refused for its client's identity (logged once per client)"

	e, log := env(chartTargets)
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("red-pod", "web-0", genuineToken(t, byPod)), TargetConn))
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("red-sa", "web-1", genuineToken(t, byAccount)), TargetConn))
	for i := range 3 {
		for key, src := range map[string]*testutil.SVIDSource{"blue": other, "node": proxyID} {
			err := e.p.SetIPContext(ctx, tokenOf(fmt.Sprintf("%s-%d", key, i), "web-0", genuineToken(t, src)), TargetConn)
			require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
			require.ErrorContains(t, err, "matches none of the rules")
		}
		err := e.p.SetIPContext(ctx, tokenOf(fmt.Sprintf("forged-%d", i), "web-0", clientprooftest.ForgeOwn(t, other.SVID, byPod.SVID.ID.String())), TargetConn)
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
		require.ErrorContains(t, err, "not proved")
	}
	require.ElementsMatch(t, []string{"red-pod", "red-sa"}, targetKeys(e.p))
	for _, c := range e.ipam.children() {
		require.NotRegexp(t, `(blue|node|forged)-`, c, "nothing allocated for a refused client")
	}
	require.Equal(t, 6, e.p.idRefusals.Count("not_allowed"))
	require.Equal(t, 3, e.p.idRefusals.Count("unproved"))
	require.Equal(t, 3, log.Count(refusedMsg), "once per client: blue, the proxy's ID, the forged claim")
	line, i := log.Find(0, refusedMsg, "limit", "not_allowed", "cause", "spiffe://example.org/ns/blue/pod/web-0")
	require.GreaterOrEqual(t, i, 0, "%s", log)
	require.Contains(t, line["reason"], "/ns/red/pod/*: path /ns/blue/pod/web-0 does not match /ns/red/pod/*")
	require.Contains(t, line["reason"], "/ns/red/sa/*: path /ns/blue/pod/web-0 does not match /ns/red/sa/*")
	_, i = log.Find(0, refusedMsg, "limit", "not_allowed", "cause", "spiffe://example.org/ns/red/sa/proxy-trench-a/node/worker-1")
	require.GreaterOrEqual(t, i, 0, "%s", log)

	e, _ = env(everyNamespace)
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("blue", "web-0", genuineToken(t, other)), TargetConn))
	require.NoError(t, e.p.SetIPContext(ctx, tokenOf("red-sa", "web-1", genuineToken(t, byAccount)), TargetConn))
	err := e.p.SetIPContext(ctx, tokenOf("node", "web-0", genuineToken(t, proxyID)), TargetConn)
	require.Equal(t, codes.PermissionDenied, status.Code(err), "a per-node ID has more segments than the patterns: %v", err)
	err = e.p.SetIPContext(ctx, tokenOf("forged", "web-0", clientprooftest.ForgeOwn(t, other.SVID, byPod.SVID.ID.String())), TargetConn)
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.ElementsMatch(t, []string{"blue", "red-sa"}, targetKeys(e.p))
}

// targetKeys are the keys of p's targets.
func targetKeys(p *Proxy) []string {
	var out []string
	for _, tg := range p.Targets() {
		out = append(out, tg.Key)
	}
	return out
}
