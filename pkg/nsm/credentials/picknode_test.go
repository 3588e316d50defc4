package credentials_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
)

// TestNodeSVIDPicked: a proxy pod that two ClusterSPIFFEIDs select (the
// chart's per-node one and SPIRE's own chart's default, by service
// account) gets both SVIDs from the workload API, the per-node one not
// first; with its node set, the credentials use the SVID that names the
// node, which the IPAM holds it to; without, the first one.
func TestNodeSVIDPicked(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "example.org")
	byAccount := ca.Mint(t, "/ns/cw/sa/proxy-trench-a")
	other := ca.Mint(t, "/ns/cw/sa/proxy-trench-a/node/worker-a")
	byNode := ca.Mint(t, "/ns/cw/sa/proxy-trench-a/node/worker-b")
	t.Setenv("SPIFFE_ENDPOINT_SOCKET", testutil.ServeWorkloadAPI(t, byAccount, other, byNode))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for node, want := range map[string]string{
		"worker-b": "spiffe://example.org/ns/cw/sa/proxy-trench-a/node/worker-b",
		"":         "spiffe://example.org/ns/cw/sa/proxy-trench-a",
		"worker-c": "spiffe://example.org/ns/cw/sa/proxy-trench-a", // none names it: the first
	} {
		creds, err := credentials.New(ctx, credentials.Config{MaxTokenLifetime: time.Minute, Node: node})
		require.NoError(t, err)
		tok, _, err := creds.TokenGenerator()(nil)
		require.NoError(t, err)
		id, err := creds.ClientProver().Token(tok)
		require.NoError(t, err)
		require.Equal(t, want, id.String(), "node %q", node)
		require.NoError(t, creds.Close())
	}
}
