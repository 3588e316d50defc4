package authorize_test

import (
	"context"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	sdkauthorize "github.com/networkservicemesh/sdk/pkg/networkservice/common/authorize"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/peer"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/clientproof"
	"github.com/causeway-net/causeway/pkg/nsm/sdkreplacement/authorize"
)

// TestCapturedTokenPassesNSMAuthorization performs the replay that
// clientproof's ledger is there for: a caller that has captured a victim's
// token (as the proxies, forwarders and NSMgrs on its path see it) puts it
// first in a path of its own, followed by a segment it signs itself whose
// subject it writes as the victim token's audience. The NSMgr's policies
// (ours and the SDK's) check only that the segment before the NSMgr's is
// signed by its caller and that the claims chain, so they pass it, and so
// do the proxy's; a Prover that has not seen the token proves the victim.
// The proxy refuses it only because it saw the token first for the
// victim's connection (TestReplayedTokenRefused in pkg/proxy).
func TestCapturedTokenPassesNSMAuthorization(t *testing.T) {
	w := newIDs(t)
	victim := testutil.NewSPIFFECA(t, "causeway.test").Mint(t, "/ns/team-b/pod/web-0")
	hour := time.Now().Add(time.Hour)
	// The victim's token as its NSMgr received it: audience that NSMgr.
	captured, _, err := clientproof.Generator(victim, time.Hour)(tlsPeer(w.nsmgr.cert).AuthInfo)
	require.NoError(t, err)
	// The attacker's own segment, signed with its key, claiming to be the
	// NSMgr the captured token names.
	own := jwt(t, es256Header, map[string]any{"sub": w.nsmgr.id, "aud": []string{w.nsmgr.id}, "exp": hour.Unix()}, w.other.key)

	atNSMgr := path(2, captured, own, w.nsmgr.token(t, w.other.id, hour))
	atProxy := path(3, captured, own, w.nsmgr.token(t, w.nse.id, hour), w.nse.token(t, w.nsmgr.id, hour))
	for _, step := range []struct {
		name   string
		path   *networkservice.Path
		caller *peer.Peer
	}{
		{"the attacker's NSMgr, called by the attacker", atNSMgr, tlsPeer(w.other.cert)},
		{"the proxy, called by the NSMgr", atProxy, tlsPeer(w.nsmgr.cert)},
	} {
		ctx := peer.NewContext(context.Background(), step.caller)
		req := &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: "c", Path: step.path}}
		_, err := authorize.NewServer().Request(ctx, req.Clone())
		require.NoError(t, err, "ours, at %s", step.name)
		err = sdkCall(func() error { _, err := sdkauthorize.NewServer().Request(ctx, req.Clone()); return err })
		require.NoError(t, err, "the SDK's, at %s", step.name)
	}

	id, err := clientproof.NewProver(victim.Bundle).Client(&networkservice.Connection{Path: atProxy})
	require.NoError(t, err)
	require.Equal(t, "spiffe://causeway.test/ns/team-b/pod/web-0", id.String(), "a Prover that never saw the token")
}
