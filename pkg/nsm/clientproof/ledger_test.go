package clientproof

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/clock"
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
// (a sweep at most a minute later, or when the ledger is full, at most once
// a second); a full ledger proves new tokens without remembering them, and
// counts them.
func TestLedgerForgetsAndBounds(t *testing.T) {
	l := newLedger(2, slog.New(slog.DiscardHandler))
	now := time.Unix(1000, 0)
	require.NoError(t, l.use("a", "conn-a", now.Add(time.Second), now))
	require.NoError(t, l.use("b", "conn-b", now.Add(time.Hour), now))
	require.NoError(t, l.use("c", "conn-c", now.Add(time.Hour), now), "full: proved, not remembered")
	require.Equal(t, LedgerStats{Tokens: 2, Max: 2, Dropped: 1}, l.stats())
	require.NoError(t, l.use("c", "conn-x", now.Add(time.Hour), now), "c was not remembered")

	later := now.Add(2 * time.Second)
	require.NoError(t, l.use("c", "conn-c", now.Add(time.Hour), later), "a's proof ran out: room for c")
	require.Equal(t, LedgerStats{Tokens: 2, Max: 2, Dropped: 2}, l.stats())
	require.ErrorIs(t, l.use("c", "conn-y", now.Add(time.Hour), later), ErrReplayed)

	l.end("conn-b")
	require.ErrorIs(t, l.use("b", "conn-b", now.Add(time.Hour), later), ErrReplayed)
	muchLater := now.Add(2 * time.Hour)
	require.NoError(t, l.use("d", "conn-d", muchLater.Add(time.Hour), muchLater))
	require.Equal(t, 1, l.stats().Tokens, "b and c forgotten at the sweep")
	require.Empty(t, l.conns["conn-c"])

	// A full ledger sweeps at most once per fullSweepEvery: a token that
	// has run out takes room until then.
	l = newLedger(1, slog.New(slog.DiscardHandler))
	require.NoError(t, l.use("x", "conn-x", now.Add(fullSweepEvery/10), now)) // a sweep at now
	xGone := now.Add(fullSweepEvery / 5)
	require.NoError(t, l.use("y", "conn-y", now.Add(time.Hour), xGone))
	require.Equal(t, LedgerStats{Tokens: 1, Max: 1, Dropped: 1}, l.stats(), "no sweep yet: x still takes the room")
	require.NoError(t, l.use("y", "conn-z", now.Add(time.Hour), xGone), "y was not remembered")
	nextSecond := now.Add(fullSweepEvery)
	require.NoError(t, l.use("y", "conn-y", now.Add(time.Hour), nextSecond))
	require.Equal(t, LedgerStats{Tokens: 1, Max: 1, Dropped: 2}, l.stats(), "swept: x forgotten, y remembered")
	require.ErrorIs(t, l.use("y", "conn-z", now.Add(time.Hour), nextSecond), ErrReplayed)
}

// TestFullLedgerSaysSo: a Prover whose ledger is full still proves new
// tokens (it fails open, so that a flood cannot lock genuine clients out),
// and says that it no longer remembers them: one line a minute while it
// drops tokens, with how many, naming no token and no connection, and
// the count in its stats. A token that is remembered is still held to
// its connection meanwhile.
func TestFullLedgerSaysSo(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "example.org")
	client := ca.Mint(t, "/ns/team-b/pod/web-0")
	clk := clock.NewFake(time.Now())
	var log testutil.JSONLog
	prover := NewProver(client.Bundle, WithClock(clk), WithLedgerSize(1),
		WithLogger(slog.New(slog.NewJSONHandler(&log, nil))))
	mint := func() string {
		tok, _, err := Generator(client, time.Hour)(nil)
		require.NoError(t, err)
		return tok
	}
	first := mint()
	_, err := prover.Client(clientConn("conn-0", first))
	require.NoError(t, err)
	var dropped []string
	for i := range 5 {
		tok := mint()
		dropped = append(dropped, tok)
		_, err := prover.Client(clientConn(fmt.Sprintf("conn-%d", i+1), tok))
		require.NoError(t, err, "full: proved all the same")
		clk.Advance(time.Second)
	}
	_, err = prover.Client(clientConn("conn-other", first))
	require.ErrorIs(t, err, ErrReplayed, "the remembered token is still held")
	require.Equal(t, LedgerStats{Tokens: 1, Max: 1, Dropped: 5}, prover.Ledger())
	require.Equal(t, 1, log.Count(fullMsg), "one line a minute")
	line, _ := log.Find(0, fullMsg)
	require.EqualValues(t, 1, line["max"])
	require.EqualValues(t, 1, line["notRemembered"])

	clk.Advance(sweepEvery)
	_, err = prover.Client(clientConn("conn-6", mint()))
	require.NoError(t, err)
	require.Equal(t, 2, log.Count(fullMsg), "the next minute's line")
	line, _ = log.Find(1, fullMsg)
	require.EqualValues(t, 5, line["notRemembered"], "those since the last line")
	require.EqualValues(t, 6, line["notRememberedTotal"])
	for _, tok := range append(dropped, first) {
		require.NotContains(t, log.String(), tok)
	}
	require.NotContains(t, log.String(), "conn-")
}

// TestLedgerConcurrentUse: tokens presented, connections ended and stats
// read from many goroutines at once, the ledger full half of the time
// (run with -race): a copy of a remembered token is refused, one of a
// token not remembered passes and is counted, and the counts add up.
func TestLedgerConcurrentUse(t *testing.T) {
	const workers, each = 8, 200
	l := newLedger(workers*each/2, slog.New(slog.DiscardHandler))
	now := time.Unix(1000, 0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				tok, conn := fmt.Sprintf("tok-%d-%d", w, i), fmt.Sprintf("conn-%d-%d", w, i)
				at := now.Add(time.Duration(i) * 10 * time.Millisecond)
				if err := l.use(tok, conn, now.Add(time.Hour), at); err != nil {
					t.Errorf("%s: %v", tok, err)
					return
				}
				if err := l.use(tok, "conn-thief", now.Add(time.Hour), at); err == nil && l.stats().Dropped == 0 {
					t.Errorf("%s replayed while nothing was dropped", tok)
					return
				}
				if i%2 == 0 {
					l.end(conn)
				}
			}
		}()
	}
	wg.Wait()
	s := l.stats()
	require.Equal(t, workers*each/2, s.Tokens, "full")
	require.EqualValues(t, 2*(workers*each-s.Tokens), s.Dropped, "each token not remembered, and its copy")
}
