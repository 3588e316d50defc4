package clientproof

import (
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
)

// clientConn is a connection whose client's segment (id client) carries tok.
func clientConn(client, tok string) *networkservice.Connection {
	return &networkservice.Connection{Path: &networkservice.Path{PathSegments: []*networkservice.PathSegment{
		{Id: client, Token: tok}, {Id: "nsmgr", Token: "any"},
	}}}
}

// TestReplayedTokenRefused: a victim's genuine token proves it for its own
// client connection, as often as that connection is requested with it;
// the same token presented for another client connection (a captured copy
// put first in another caller's path) is refused, and so is the token
// presented again after its connection ended; the victim's next token
// proves it again. A token is remembered until its proof would run out.
func TestReplayedTokenRefused(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "example.org")
	victim := ca.Mint(t, "/ns/team-b/pod/web-0")
	prover := NewProver(victim.Bundle)
	mint := func() string {
		tok, _, err := Generator(victim, time.Minute)(nil)
		require.NoError(t, err)
		return tok
	}
	want := "spiffe://example.org/ns/team-b/pod/web-0"

	tok := mint()
	for range 2 { // its request, then the same request again (its NSMgr's)
		id, err := prover.Client(clientConn("victim-conn", tok))
		require.NoError(t, err)
		require.Equal(t, want, id.String())
	}
	_, err := prover.Client(clientConn("attacker-conn", tok))
	require.ErrorIs(t, err, ErrReplayed)
	require.ErrorContains(t, err, "presented before for the client connection victim-conn")

	prover.End(clientConn("victim-conn", mint()))
	_, err = prover.Client(clientConn("victim-conn", tok))
	require.ErrorIs(t, err, ErrReplayed, "after its connection ended")
	require.ErrorContains(t, err, "has ended")
	_, err = prover.Client(clientConn("attacker-conn", tok))
	require.ErrorIs(t, err, ErrReplayed)

	id, err := prover.Client(clientConn("victim-conn", mint()))
	require.NoError(t, err, "the victim's new token, its connection requested again")
	require.Equal(t, want, id.String())
	require.Equal(t, 2, prover.Ledger().Tokens)

	_, err = prover.Client(clientConn("", mint()))
	require.ErrorContains(t, err, "no id")
}

// TestLedgerForgetsAndBounds: a token is forgotten once its proof runs out
// (a sweep at most a minute later, or when the ledger is full); a full
// ledger proves new tokens without remembering them, and counts them.
func TestLedgerForgetsAndBounds(t *testing.T) {
	l := newLedger(2)
	now := time.Unix(1000, 0)
	require.NoError(t, l.use("a", "conn-a", now.Add(time.Second), now))
	require.NoError(t, l.use("b", "conn-b", now.Add(time.Hour), now))
	require.NoError(t, l.use("c", "conn-c", now.Add(time.Hour), now), "full: proved, not remembered")
	require.Equal(t, LedgerStats{Tokens: 2, Dropped: 1}, l.stats())
	require.NoError(t, l.use("c", "conn-x", now.Add(time.Hour), now), "c was not remembered")

	later := now.Add(2 * time.Second)
	require.NoError(t, l.use("c", "conn-c", now.Add(time.Hour), later), "a's proof ran out: room for c")
	require.Equal(t, LedgerStats{Tokens: 2, Dropped: 2}, l.stats())
	require.ErrorIs(t, l.use("c", "conn-y", now.Add(time.Hour), later), ErrReplayed)

	l.end("conn-b")
	require.ErrorIs(t, l.use("b", "conn-b", now.Add(time.Hour), later), ErrReplayed)
	muchLater := now.Add(2 * time.Hour)
	require.NoError(t, l.use("d", "conn-d", muchLater.Add(time.Hour), muchLater))
	require.Equal(t, 1, l.stats().Tokens, "b and c forgotten at the sweep")
	require.Empty(t, l.conns["conn-c"])
}
