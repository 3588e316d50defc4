package clientproof

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/causeway-net/causeway/internal/testutil"
)

// BenchmarkProve is the cost of the proof a proxy makes at each request of
// a target connection (chain verification, ECDSA signature, claims).
func BenchmarkProve(b *testing.B) {
	ca := testutil.NewSPIFFECA(b, "example.org")
	src := ca.Mint(b, "/ns/shop/pod/web-0")
	tok, _, err := Generator(src, time.Hour)(nil)
	if err != nil {
		b.Fatal(err)
	}
	p := NewProver(src.Bundle)
	b.ResetTimer()
	for b.Loop() {
		if _, err := p.Token(tok); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFullLedger is the ledger's cost of a new token while it is full
// of tokens still valid (a flood of new tokens, one a microsecond): a
// lookup, and a walk of every token at most once per fullSweepEvery of the
// clock; beside it, as a baseline, a sweep at every new token (as the
// ledger swept before it was rate-limited).
func BenchmarkFullLedger(b *testing.B) {
	for _, mode := range []struct {
		name  string
		every time.Duration
	}{{"sweep-once-a-second", fullSweepEvery}, {"sweep-at-each-token", 0}} {
		b.Run(mode.name, func(b *testing.B) {
			l := newLedger(DefaultLedgerSize, slog.New(slog.DiscardHandler))
			l.fullEvery = mode.every
			now := time.Unix(1000, 0)
			until := now.Add(time.Hour)
			for i := range DefaultLedgerSize {
				if err := l.use(strconv.Itoa(i), "conn", until, now); err != nil {
					b.Fatal(err)
				}
			}
			i := 0
			for b.Loop() {
				i++
				if err := l.use("new-"+strconv.Itoa(i), "conn-new", until, now.Add(time.Duration(i)*time.Microsecond)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
