package clientproof

import (
	"crypto/sha256"
	"errors"
	"fmt"
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
// out (at most; and whenever it is full).
const sweepEvery = time.Minute

// ledger remembers the tokens a Prover proved for client connections, each
// with the connection it was first presented for, until its proof runs out
// (the token's expiry, or its certificate's): a token holds for one client
// connection (the id of the path's first segment, which the client chose)
// and, once that connection has ended, for none. A client mints a new token
// at each call (its NSMgr takes the first segment's token from the call),
// so the same token comes back only when its connection is requested again
// by the NSM elements that hold it. When the ledger holds max tokens still
// valid, a new one is proved but not remembered (dropped counts them).
type ledger struct {
	mu        sync.Mutex
	max       int
	tokens    map[[sha256.Size]byte]*tokenUse
	conns     map[string][][sha256.Size]byte
	nextSweep time.Time
	dropped   uint64
}

// tokenUse is what the ledger knows of one token.
type tokenUse struct {
	conn  string    // the client connection it was first presented for
	until time.Time // when its proof runs out
	ended bool      // conn has ended
}

func newLedger(max int) *ledger {
	return &ledger{max: max, tokens: map[[sha256.Size]byte]*tokenUse{}, conns: map[string][][sha256.Size]byte{}}
}

// use records that token, whose proof holds until until, is presented at
// now for the client connection conn, and returns ErrReplayed (wrapped,
// naming the connection) when it was presented before for another one, or
// for conn after conn ended.
func (l *ledger) use(token, conn string, until, now time.Time) error {
	key := sha256.Sum256([]byte(token))
	l.mu.Lock()
	defer l.mu.Unlock()
	if !now.Before(l.nextSweep) {
		l.sweep(now)
	}
	if u, ok := l.tokens[key]; ok && now.Before(u.until) {
		switch {
		case u.conn != conn:
			return fmt.Errorf("%w: it was presented before for the client connection %s", ErrReplayed, u.conn)
		case u.ended:
			return fmt.Errorf("%w: its client connection %s has ended", ErrReplayed, conn)
		}
		return nil
	}
	if len(l.tokens) >= l.max {
		l.sweep(now)
		if len(l.tokens) >= l.max {
			l.dropped++
			return nil
		}
	}
	l.tokens[key] = &tokenUse{conn: conn, until: until}
	l.conns[conn] = append(l.conns[conn], key)
	return nil
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
	l.nextSweep = now.Add(sweepEvery)
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
	Dropped uint64 // proved while the ledger was full, not remembered
}

func (l *ledger) stats() LedgerStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LedgerStats{Tokens: len(l.tokens), Dropped: l.dropped}
}
