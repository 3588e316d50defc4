package clientproof

import (
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/tools/spiffejwt"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/clientproof/clientprooftest"
)

func connOf(tok string) *networkservice.Connection {
	return &networkservice.Connection{Path: &networkservice.Path{PathSegments: []*networkservice.PathSegment{{Id: "c", Token: tok}}}}
}

// TestClientProvedOnlyByItsOwnCertificate: a client's token made by
// Generator proves its ID; a client that writes another workload's ID as
// its subject (with its own chain, with the victim's chain, or with no
// chain, as NSM's own generator does), a chain of another trust root and
// an expired token are all refused.
func TestClientProvedOnlyByItsOwnCertificate(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "example.org")
	attacker := ca.Mint(t, "/ns/team-a/pod/attacker")
	victim := ca.Mint(t, "/ns/team-b/pod/web-0")
	prover := NewProver(attacker.Bundle)

	tok, _, err := Generator(attacker, time.Minute)(nil)
	require.NoError(t, err)
	id, err := prover.Client(connOf(tok))
	require.NoError(t, err)
	require.Equal(t, "spiffe://example.org/ns/team-a/pod/attacker", id.String())

	exp := time.Now().Add(time.Minute)
	victimID := victim.SVID.ID.String()
	_, err = prover.Token(clientprooftest.Forge(t, attacker.SVID, attacker.SVID, victimID, exp))
	require.ErrorContains(t, err, "is not its certificate's ID")
	_, err = prover.Token(clientprooftest.Forge(t, attacker.SVID, victim.SVID, victimID, exp))
	require.ErrorContains(t, err, "not signed by the key of its certificate")
	_, err = prover.Token(clientprooftest.Forge(t, attacker.SVID, nil, victimID, exp))
	require.ErrorIs(t, err, ErrNoChain)

	sdkTok, _, err := spiffejwt.TokenGeneratorFunc(victim, time.Minute)(nil)
	require.NoError(t, err)
	_, err = prover.Token(sdkTok)
	require.ErrorIs(t, err, ErrNoChain, "NSM's own tokens carry no chain")

	rogue := testutil.NewSPIFFECA(t, "example.org").Mint(t, "/ns/team-b/pod/web-0")
	_, err = prover.Token(clientprooftest.Forge(t, rogue.SVID, rogue.SVID, victimID, exp))
	require.ErrorContains(t, err, "certificate chain")

	_, err = prover.Token(clientprooftest.Forge(t, victim.SVID, victim.SVID, victimID, time.Now().Add(-time.Second)))
	require.ErrorContains(t, err, "expired")

	_, err = prover.Client(&networkservice.Connection{})
	require.Error(t, err)
}
