package kubesource

import (
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/clientproof"
	"github.com/causeway-net/causeway/pkg/nsm/clientproof/clientprooftest"
)

// asPod is pod run under service account sa.
func asPod(ns, name, sa string) *corev1.Pod {
	p := pod(ns, name, true, map[string]string{"app": name})
	p.Spec.ServiceAccountName = sa
	return p
}

// identityOf is what the proxy records for a connection whose first token
// is tok: the SPIFFE ID the token proves, "" when it proves none.
func identityOf(t *testing.T, prover *clientproof.Prover, tok string) string {
	t.Helper()
	id, err := prover.Token(tok)
	if err != nil {
		return ""
	}
	return id.String()
}

func genuineToken(t *testing.T, src *testutil.SVIDSource) string {
	t.Helper()
	tok, _, err := clientproof.Generator(src, time.Minute)(nil)
	require.NoError(t, err)
	return tok
}

// TestForgedPodNameNotPublished performs the attack of finding 1 on the
// publisher's input: a target of team-a names team-b's pod on its
// connection (podName), with its own SVID's token or with a token whose
// subject it wrote as the victim's. Neither is published for the victim's
// pod, in either SPIRE scheme; each pair is counted once and logged once,
// however often the targets are asked for. The victim itself is
// published, and of two pods of one name in two namespaces the one its
// identity names is chosen (the twin no longer hides it). Under
// serviceAccount another pod of the victim's account and namespace still
// passes for it: the scheme tells them apart no further.
func TestForgedPodNameNotPublished(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "example.org")
	own := func() spiffeid.TrustDomain { return spiffeid.RequireTrustDomainFromString("example.org") }
	byPod := map[string]*testutil.SVIDSource{
		"attacker": ca.Mint(t, "/ns/team-a/pod/attacker"), "web-0": ca.Mint(t, "/ns/team-b/pod/web-0"),
	}
	bySA := map[string]*testutil.SVIDSource{
		"attacker": ca.Mint(t, "/ns/team-a/sa/attacker"), "web-0": ca.Mint(t, "/ns/team-b/sa/web"),
		"web-1": ca.Mint(t, "/ns/team-b/sa/web"),
	}
	prover := clientproof.NewProver(byPod["web-0"].Bundle)
	addrs := []netip.Addr{netip.MustParseAddr("172.16.0.9")}
	for _, tc := range []struct {
		scheme IDScheme
		ids    map[string]*testutil.SVIDSource
	}{{IDSchemePod, byPod}, {IDSchemeServiceAccount, bySA}, {IDSchemeAny, byPod}} {
		t.Run(string(tc.scheme), func(t *testing.T) {
			client := fake.NewClientset(asPod("team-a", "attacker", "attacker"), asPod("team-b", "web-0", "web"),
				asPod("team-b", "web-1", "web"))
			log := &testutil.JSONLog{}
			logger := slog.New(slog.NewJSONHandler(log, nil))
			refusals := NewIdentityRefusals(WithLogger(logger))
			n := runNodePods(t, client, nil, WithLogger(logger), WithTargetIdentity(tc.scheme, own, refusals))
			victimID := tc.ids["web-0"].SVID.ID.String()
			attacks := []Conn{
				{Pod: "web-0", Identity: identityOf(t, prover, genuineToken(t, tc.ids["attacker"])), Addrs: addrs, Up: true},
				{Pod: "web-0", Identity: identityOf(t, prover, clientprooftest.ForgeOwn(t, tc.ids["attacker"].SVID, victimID)), Addrs: addrs, Up: true},
				{Pod: "web-0", Addrs: addrs, Up: true}, // NSM's own token: nothing proved
			}
			for range 3 {
				require.Empty(t, n.Targets(attacks))
			}
			// Two pairs: the attacker's ID, and none proved (the forged
			// subject and NSM's own token alike).
			require.Equal(t, 2, refusals.Count("identity"))
			require.Equal(t, 2, log.Count("target not published: its client's proved SPIFFE ID does not name the pod its connection claims (logged once per identity and pod)"))

			victim := []Conn{{Pod: "web-0", Identity: identityOf(t, prover, genuineToken(t, tc.ids["web-0"])), Addrs: addrs, Up: true}}
			got := n.Targets(victim)
			require.Len(t, got, 1)
			require.Equal(t, "web-0", got[0].Pod)

			_, err := client.CoreV1().Pods("team-c").Create(t.Context(), asPod("team-c", "web-0", "other"), metav1.CreateOptions{})
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				n.mu.Lock()
				defer n.mu.Unlock()
				return len(n.byName["web-0"]) == 2
			}, waitFor, 5*time.Millisecond)
			got = n.Targets(victim)
			require.Len(t, got, 1)
			require.Equal(t, "team-b", got[0].Namespace, "the twin of team-c does not hide the victim")
			require.Empty(t, n.Targets(attacks[:1]), "nor does it let the attacker in")

			if tc.scheme == IDSchemeServiceAccount {
				got = n.Targets([]Conn{{Pod: "web-0", Identity: identityOf(t, prover, genuineToken(t, tc.ids["web-1"])), Addrs: addrs, Up: true}})
				require.Len(t, got, 1, "a pod of the same account and namespace passes")
			}
		})
	}
}

// Without the check (insecure mode) the claimed pod is published as before.
func TestTargetIdentityOff(t *testing.T) {
	client := fake.NewClientset(asPod("team-b", "web-0", "web"))
	n := runNodePods(t, client, nil, WithLogger(testLogger(t)))
	require.Len(t, n.Targets([]Conn{{Pod: "web-0", Up: true}}), 1)
	_, err := ParseIDScheme("node")
	require.ErrorContains(t, err, "want off, pod, serviceAccount or any")
}
