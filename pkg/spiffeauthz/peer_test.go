package spiffeauthz

import (
	"testing"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-net/causeway/internal/testutil"
)

// TestClientRefusesAnImpostorServer performs finding 7's attack: a
// workload of the trust domain with an SVID of its own stands in for the
// IPAM (a poisoned DNS name, a Service pointed at it). A client that holds
// the server to the IPAM's rule refuses the handshake, naming the ID it
// got; the real IPAM is served. Without rules any ID of the domain passes
// (the earlier behaviour).
func TestClientRefusesAnImpostorServer(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "causeway.test")
	proxy := ca.Mint(t, proxyPath)
	own := func() spiffeid.TrustDomain { return proxy.SVID.ID.TrustDomain() }
	ipamRules := []string{ipamPath, "/ns/causeway/pod/ipam-trench-a-[0-9]"}
	authz, err := ServerAuthorizer(ipamRules, own)
	require.NoError(t, err)

	realAddr, _, _ := serve(t, ca.Mint(t, ipamPath), proxyPath)
	require.NoError(t, allocate(dial(t, realAddr, tlsconfig.MTLSClientConfig(proxy, proxy, authz))))
	podAddr, _, _ := serve(t, ca.Mint(t, "/ns/causeway/pod/ipam-trench-a-0"), proxyPath)
	require.NoError(t, allocate(dial(t, podAddr, tlsconfig.MTLSClientConfig(proxy, proxy, authz))))

	impostor, _, _ := serve(t, ca.Mint(t, "/ns/team-b/sa/impostor"), proxyPath)
	err = allocate(dial(t, impostor, tlsconfig.MTLSClientConfig(proxy, proxy, authz)))
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	require.ErrorContains(t, err, "spiffe://causeway.test/ns/team-b/sa/impostor is not the one expected")

	anyID, err := ServerAuthorizer(nil, own)
	require.NoError(t, err)
	require.NoError(t, allocate(dial(t, impostor, tlsconfig.MTLSClientConfig(proxy, proxy, anyID))))

	_, err = ServerAuthorizer([]string{"ipam"}, own)
	require.ErrorContains(t, err, "neither a SPIFFE ID")
}
