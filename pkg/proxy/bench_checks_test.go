package proxy

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/clientproof"
	"github.com/causeway-net/causeway/pkg/spiffeauthz"
)

// BenchmarkTargetSetupChecks is the cost of the identity checks (docs/security.md)
// on target connection setups: b.N setups of new dual-stack target
// connections whose first segment carries a token of clientproof's
// Generator (64 concurrent callers, an IPAM that answers at once: the
// proxy's own cost) on each of two proxies, one with the checks off
// (TargetIdentity unset, as in insecure mode), one with them on (each token
// proved against the bundle and held to its connection, the connection's
// key to its client, the client's ID matched against a conduit's rules),
// in alternating batches of 250 so that both see the same load. The limit
// per client counts in both; the bridge ports' filters are the
// dataplane's (BenchmarkAddPort).
//
//	go test -run '^$' -bench TargetSetupChecks -benchtime 2000x -v ./pkg/proxy
func BenchmarkTargetSetupChecks(b *testing.B) {
	const batch = 250
	ca := testutil.NewSPIFFECA(b, "example.org")
	srcs := make([]*testutil.SVIDSource, 16)
	for i := range srcs {
		srcs[i] = ca.Mint(b, fmt.Sprintf("/ns/team-%d/pod/web-%d", i, i))
	}
	allowed, err := spiffeauthz.IDCheck([]string{"/ns/team-*/pod/*"}, func() spiffeid.TrustDomain { return srcs[0].SVID.ID.TrustDomain() })
	require.NoError(b, err)
	prover := clientproof.NewProver(srcs[0].Bundle)
	modes := []struct {
		name   string
		proxy  *Proxy
		tokens []string
		spent  time.Duration
	}{
		{name: "without", proxy: setupProxy(b, TargetIdentity{}, b.N), tokens: mintTokens(b, srcs, b.N)},
		{name: "with", proxy: setupProxy(b, TargetIdentity{Prove: prover.Client, Allowed: allowed, End: prover.End}, b.N),
			tokens: mintTokens(b, srcs, b.N)},
	}
	b.ResetTimer()
	for from := 0; from < b.N; from += batch {
		to := min(from+batch, b.N)
		for i := range modes {
			modes[i].spent += targetSetups(b, modes[i].proxy, modes[i].tokens, from, to)
		}
	}
	b.StopTimer()
	off, on := float64(b.N)/modes[0].spent.Seconds(), float64(b.N)/modes[1].spent.Seconds()
	b.ReportMetric(off, "setups/s-off")
	b.ReportMetric(on, "setups/s-on")
	if b.N < 2*batch {
		return // the harness's first call (b.N 1): no figure
	}
	b.Logf("FIGURE: proxy target connection setups (dual-stack, 64 concurrent, IPAM answering at once, %d each in alternating batches): %.0f /s without the identity checks, %.0f /s with them (proof, replay ledger, key holder, allowed IDs): %.2f×",
		b.N, off, on, on/off)
}

// mintTokens mints n tokens, spread over the sources.
func mintTokens(b *testing.B, srcs []*testutil.SVIDSource, n int) []string {
	b.Helper()
	out := make([]string, n)
	for i := range out {
		out[i] = genuineToken(b, srcs[i%len(srcs)])
	}
	return out
}

// setupProxy is a proxy with ti on a fake dataplane and an IPAM that
// answers at once, for n target connections; it is closed when b ends.
func setupProxy(b *testing.B, ti TargetIdentity, n int) *Proxy {
	b.Helper()
	p, err := New(context.Background(), Config{
		Conduit: "conduit-a", Trench: "trench-a", Node: "bench",
		IPAM: serveIPAM(b, &fakeIPAM{nodes: map[string]*fakeNode{}, wide: true}), Dataplane: newFakeDataplane(),
		Logger: testLogger(), TargetIdentity: ti, MaxConnectionsPerClient: n,
	})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, p.Close(context.Background())) })
	return p
}

// targetSetups sets up on p one target connection per token of
// tokens[from:to], 64 at a time, and returns how long it took.
func targetSetups(b *testing.B, p *Proxy, tokens []string, from, to int) time.Duration {
	var (
		next   atomic.Int64
		failed atomic.Int64
		wg     sync.WaitGroup
	)
	next.Store(int64(from))
	start := time.Now()
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(to); i = next.Add(1) - 1 {
				conn := tokenOf(fmt.Sprintf("target-%d", i), "web", tokens[i])
				if err := p.SetIPContext(context.Background(), conn, TargetConn); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	require.Zero(b, failed.Load(), "setups failed")
	return elapsed
}
