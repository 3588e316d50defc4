package clientproof

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrReplayed says that a token that proves its client was presented
// before for another client connection, or for one that has ended: a copy
// of it is being presented again.
var ErrReplayed = errors.New("the token was replayed")

// DefaultLedgerSize bounds the tokens a Prover's ledger remembers.
const DefaultLedgerSize = 1 << 16

// sweepEvery is how often a ledger forgets the tokens whose proof has run
// out, and how often at most a full ledger logs that it drops tokens.
const sweepEvery = time.Minute

// fullSweepEvery is how often at most a full ledger sweeps before it drops
// a new token: a sweep walks every token under the lock, and a ledger stays
// full while new tokens come faster than old ones run out (an attack, or a
// ledger too small), so that a sweep at each token would cost a walk of the
// whole ledger per request exactly then. Between two sweeps a full ledger
// drops a new token at the cost of a map lookup.
const fullSweepEvery = time.Second

// fullMsg is the line a full ledger logs, at most once per sweepEvery.
const fullMsg = "token ledger full: proved target tokens are not being remembered, so a copy of each can be replayed to this proxy until it expires"

// ledger remembers the tokens a Prover proved for client connections, each
// with the connection it was first presented for, until its proof runs out
// (the token's expiry, or its certificate's): a token holds for one client
// connection (the id of the path's first segment, which the client chose)
// and, once that connection has ended, for none. A client mints a new token
// at each call (its NSMgr takes the first segment's token from the call),
// so the same token comes back only when its connection is requested again
// by the NSM elements that hold it. When the ledger holds max tokens, a new
// one is proved but not remembered (dropped counts them; a copy of it can
// be replayed until it expires): the ledger fails open, so that a flood of
// tokens cannot refuse genuine clients, and says so in its log at most once
// per sweepEvery. A full ledger first forgets the tokens that have run out,
// at most once per fullSweepEvery.
type ledger struct {
	mu            sync.Mutex
	max           int
	fullEvery     time.Duration // fullSweepEvery (0 in a benchmark's baseline)
	log           *slog.Logger
	tokens        map[[sha256.Size]byte]*tokenUse
	conns         map[string][][sha256.Size]byte
	nextSweep     time.Time // of the periodic sweep
	nextFullSweep time.Time // earliest sweep of a full ledger
	dropped       uint64
	nextLine      time.Time // earliest line about dropped tokens
	droppedLogged uint64    // dropped at the last line
}

// tokenUse is what the ledger knows of one token.
type tokenUse struct {
	conn  string    // the client connection it was first presented for
	until time.Time // when its proof runs out
	ended bool      // conn has ended
}

func newLedger(max int, log *slog.Logger) *ledger {
	return &ledger{max: max, fullEvery: fullSweepEvery, log: log, tokens: map[[sha256.Size]byte]*tokenUse{}, conns: map[string][][sha256.Size]byte{}}
}

// use records that token, whose proof holds until until, is presented at
// now for the client connection conn, and returns ErrReplayed (wrapped,
// naming the connection) when it was presented before for another one, or
// for conn after conn ended.
func (l *ledger) use(token, conn string, until, now time.Time) error {
	key := sha256.Sum256([]byte(token))
	l.mu.Lock()
	full, err := l.useLocked(key, conn, until, now)
	l.mu.Unlock()
	if full != nil {
		l.log.Warn(fullMsg, full...)
	}
	return err
}

// useLocked is use with l.mu held; full, when not nil, are the attributes
// of the line to log (after l.mu is released) that tokens are being
// dropped.
func (l *ledger) useLocked(key [sha256.Size]byte, conn string, until, now time.Time) (full []any, err error) {
	if !now.Before(l.nextSweep) {
		l.sweep(now)
	}
	if u, ok := l.tokens[key]; ok && now.Before(u.until) {
		switch {
		case u.conn != conn:
			return nil, fmt.Errorf("%w: it was presented before for the client connection %s", ErrReplayed, u.conn)
		case u.ended:
			return nil, fmt.Errorf("%w: its client connection %s has ended", ErrReplayed, conn)
		}
		return nil, nil
	}
	if len(l.tokens) >= l.max && !now.Before(l.nextFullSweep) {
		l.sweep(now)
	}
	if len(l.tokens) >= l.max {
		l.dropped++
		return l.fullLine(now), nil
	}
	l.tokens[key] = &tokenUse{conn: conn, until: until}
	l.conns[conn] = append(l.conns[conn], key)
	return nil, nil
}

// fullLine returns the attributes of the line that says the full ledger
// drops tokens, once per sweepEvery (nil otherwise): how many since the
// last line and in all, never which tokens or connections.
func (l *ledger) fullLine(now time.Time) []any {
	if now.Before(l.nextLine) {
		return nil
	}
	attrs := []any{"max", l.max, "notRemembered", l.dropped - l.droppedLogged, "notRememberedTotal", l.dropped}
	l.nextLine, l.droppedLogged = now.Add(sweepEvery), l.dropped
	return attrs
}

// end records that the client connection conn has ended: its tokens no
// longer prove anything.
func (l *ledger) end(conn string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, key := range l.conns[conn] {
		if u, ok := l.tokens[key]; ok {
			u.ended = true
		}
	}
	delete(l.conns, conn)
}

// sweep forgets the tokens whose proof has run out at now.
func (l *ledger) sweep(now time.Time) {
	l.nextSweep, l.nextFullSweep = now.Add(sweepEvery), now.Add(l.fullEvery)
	for key, u := range l.tokens {
		if !now.Before(u.until) {
			delete(l.tokens, key)
		}
	}
	for conn, keys := range l.conns {
		kept := keys[:0]
		for _, key := range keys {
			if _, ok := l.tokens[key]; ok {
				kept = append(kept, key)
			}
		}
		if len(kept) == 0 {
			delete(l.conns, conn)
		} else {
			l.conns[conn] = kept
		}
	}
}

// LedgerStats is what a Prover's ledger holds.
type LedgerStats struct {
	Tokens  int    // remembered, until their proof runs out
	Max     int    // the most it remembers
	Dropped uint64 // proved while the ledger was full, not remembered
}

func (l *ledger) stats() LedgerStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LedgerStats{Tokens: len(l.tokens), Max: l.max, Dropped: l.dropped}
}
