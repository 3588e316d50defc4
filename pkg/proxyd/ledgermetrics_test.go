package proxyd

import (
	"log/slog"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/clientproof"
)

// TestLedgerMetrics: the proxy exports what its ledger of target tokens
// holds, and the tokens it proved while full without remembering them.
func TestLedgerMetrics(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "example.org")
	client := ca.Mint(t, "/ns/team-b/pod/web-0")
	prover := clientproof.NewProver(client.Bundle, clientproof.WithLedgerSize(1), clientproof.WithLogger(slog.New(slog.DiscardHandler)))
	for _, conn := range []string{"conn-0", "conn-1", "conn-2"} {
		tok, _, err := clientproof.Generator(client, time.Hour)(nil)
		require.NoError(t, err)
		_, err = prover.Client(&networkservice.Connection{Path: &networkservice.Path{PathSegments: []*networkservice.PathSegment{{Id: conn, Token: tok}}}})
		require.NoError(t, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newLedgerMetrics(prover.Ledger))
	require.Equal(t, map[string]float64{
		"causeway_proxy_token_ledger_tokens":             1,
		"causeway_proxy_token_ledger_max_tokens":         1,
		"causeway_proxy_token_ledger_unremembered_total": 2,
	}, testutil.Gather(t, reg))
}
