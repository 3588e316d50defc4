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

func TestParseRuleRefusesWhatNoIDCouldMatch(t *testing.T) {
	for in, want := range map[string]string{
		"proxy":                      "neither a SPIFFE ID",
		"spiffe://td":                "has no path",
		"spiffe://TD!/ns/a":          "trust domain",
		"/ns/a/[pod":                 "bad wildcard",
		"/":                          "non-empty segments",
		"/ns//sa/proxy":              "non-empty segments",
		"/ns/a/sa/":                  "non-empty segments",
		"spiffe://td/ns/a/pod/[a-":   "bad wildcard",
		"  spiffe://td/ns/a/sa/b/ ":  "non-empty segments",
		"http://example.org/ns/a/sa": "neither a SPIFFE ID",
	} {
		_, err := ParseRule(in)
		require.ErrorContains(t, err, want, in)
		require.ErrorContains(t, err, "\"", "the error quotes the rule %q", in)
	}
	_, err := ParseRules([]string{"/ns/a/sa/b", "nope"})
	require.ErrorContains(t, err, `"nope"`)
}

func TestRuleString(t *testing.T) {
	for _, in := range []string{"spiffe://k8s.nsm/ns/a/pod/proxy-?????", "/ns/a/sa/b"} {
		r, err := ParseRule(" " + in + " ")
		require.NoError(t, err)
		require.Equal(t, in, r.String())
	}
}

// TestRuleMiss covers both ways SPIRE installations name pods: NSM's
// ClusterSPIFFEID (pod-based) and SPIRE's chart (service-account based),
// with the trust domain given or taken from the server's own SVID.
func TestRuleMiss(t *testing.T) {
	own := spiffeid.RequireTrustDomainFromString("k8s.nsm")
	daemonSetPods := "/ns/causeway/pod/proxy-a-lb-[a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9]"
	cases := []struct {
		rule, id, miss string
	}{
		// NSM's pod-based IDs: the pods of one DaemonSet, nothing else.
		{daemonSetPods, "spiffe://k8s.nsm/ns/causeway/pod/proxy-a-lb-x7k2q", ""},
		{daemonSetPods, "spiffe://k8s.nsm/ns/causeway/pod/proxy-a-lb-x7k2", "does not match"},
		{daemonSetPods, "spiffe://k8s.nsm/ns/causeway/pod/proxy-a-lb2-x7k2q", "does not match"},
		{daemonSetPods, "spiffe://k8s.nsm/ns/other/pod/proxy-a-lb-x7k2q", "does not match"},
		{daemonSetPods, "spiffe://k8s.nsm/ns/causeway/pod/proxy-a-lb-x7k2q/extra", "does not match"},
		{daemonSetPods, "spiffe://elsewhere/ns/causeway/pod/proxy-a-lb-x7k2q", "trust domain elsewhere is not k8s.nsm"},
		// '*' never crosses a segment.
		{"/ns/causeway/pod/*", "spiffe://k8s.nsm/ns/causeway/pod/a/b", "does not match"},
		{"/ns/causeway/pod/*", "spiffe://k8s.nsm/ns/causeway/pod/a", ""},
		// SPIRE's service-account IDs, exact.
		{"/ns/causeway/sa/proxy-a", "spiffe://k8s.nsm/ns/causeway/sa/proxy-a", ""},
		{"/ns/causeway/sa/proxy-a", "spiffe://k8s.nsm/ns/causeway/sa/proxy-ab", "does not match"},
		{"/ns/causeway/sa/proxy-a", "spiffe://k8s.nsm/ns/causeway/pod/proxy-a", "does not match"},
		// A trust domain given in the rule wins over the server's own.
		{"spiffe://example.org/ns/causeway/sa/proxy-a", "spiffe://example.org/ns/causeway/sa/proxy-a", ""},
		{"spiffe://example.org/ns/causeway/sa/proxy-a", "spiffe://k8s.nsm/ns/causeway/sa/proxy-a", "trust domain k8s.nsm is not example.org"},
	}
	for _, c := range cases {
		r, err := ParseRule(c.rule)
		require.NoError(t, err)
		miss := r.Miss(spiffeid.RequireFromString(c.id), own)
		if c.miss == "" {
			require.Empty(t, miss, "%s should match %s", c.rule, c.id)
		} else {
			require.Contains(t, miss, c.miss, "%s against %s", c.rule, c.id)
		}
	}
	// Without its own trust domain the server cannot use a rule without one.
	r, err := ParseRule("/ns/causeway/sa/proxy-a")
	require.NoError(t, err)
	require.Contains(t, r.Miss(spiffeid.RequireFromString("spiffe://k8s.nsm/ns/causeway/sa/proxy-a"), spiffeid.TrustDomain{}), "not known")
}

// TestBothSchemesOverMTLS: a server whose rules accept the proxies under
// both naming schemes (as the chart's default does) serves a proxy of
// either kind over mutual TLS, in its own trust domain, and refuses a
// neighbour pod with a log that names the caller and why each rule missed.
func TestBothSchemesOverMTLS(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "k8s.nsm")
	serverSrc := ca.Mint(t, "/ns/causeway/pod/ipam-a-0")
	addr, _, logs := serve(t, serverSrc,
		"/ns/causeway/sa/proxy-a",
		"/ns/causeway/pod/proxy-a-lb-[a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9]")
	serverID := serverSrc.SVID.ID
	for _, p := range []string{"/ns/causeway/sa/proxy-a", "/ns/causeway/pod/proxy-a-lb-b2d4f"} {
		proxy := ca.Mint(t, p)
		require.NoError(t, allocate(dial(t, addr, tlsconfig.MTLSClientConfig(proxy, proxy, tlsconfig.AuthorizeID(serverID)))), p)
	}
	neighbour := ca.Mint(t, "/ns/causeway/pod/web-7d9f8-b2d4f")
	err := allocate(dial(t, addr, tlsconfig.MTLSClientConfig(neighbour, neighbour, tlsconfig.AuthorizeID(serverID))))
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "spiffe://k8s.nsm/ns/causeway/pod/web-7d9f8-b2d4f")
	require.Contains(t, status.Convert(err).Message(), "matches none of the server's rules")
	require.Contains(t, logs.String(), "spiffe://k8s.nsm/ns/causeway/pod/web-7d9f8-b2d4f")
	require.Contains(t, logs.String(), "/ns/causeway/sa/proxy-a: path /ns/causeway/pod/web-7d9f8-b2d4f does not match /ns/causeway/sa/proxy-a")
	require.Contains(t, logs.String(), "AUTHORIZED_IDS", "the log says what to change")
}
