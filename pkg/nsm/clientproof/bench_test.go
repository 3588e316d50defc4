package clientproof

import (
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
