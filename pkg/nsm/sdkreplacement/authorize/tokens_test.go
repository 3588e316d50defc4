package authorize_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/causeway-net/causeway/internal/testutil"
)

// workload is a SPIFFE identity of the tests: its ID, certificate and key.
type workload struct {
	id   string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newWorkload(t testing.TB, ca *testutil.SPIFFECA, path string) workload {
	t.Helper()
	src := ca.Mint(t, path)
	key, ok := src.SVID.PrivateKey.(*ecdsa.PrivateKey)
	require.True(t, ok)
	return workload{id: src.SVID.ID.String(), cert: src.SVID.Certificates[0], key: key}
}

// jwt encodes claims under header and signs them with key (ES256, r||s,
// each as long as the curve's size); a nil key leaves the signature empty.
func jwt(t testing.TB, header string, claims map[string]any, key *ecdsa.PrivateKey) string {
	t.Helper()
	if key == nil {
		return jwtSigned(t, header, claims, nil, 0)
	}
	return jwtSigned(t, header, claims, key, (key.Curve.Params().BitSize+7)/8)
}

// jwtSigned is jwt with r and s each zero-padded to half bytes.
func jwtSigned(t testing.TB, header string, claims map[string]any, key *ecdsa.PrivateKey, half int) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	require.NoError(t, err)
	signed := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString(payload)
	if key == nil {
		return signed + "."
	}
	digest := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
	require.NoError(t, err)
	sig := make([]byte, 2*half)
	r.FillBytes(sig[:half])
	s.FillBytes(sig[half:])
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// editPart replaces part i (0 header, 1 payload, 2 signature) of tok with
// edit's result; the signature is left as it was.
func editPart(tok string, i int, edit func(string) string) string {
	parts := strings.Split(tok, ".")
	parts[i] = edit(parts[i])
	return strings.Join(parts, ".")
}

// newP384Workload is a workload with a self-signed P-384 certificate (no
// SPIFFE CA mints one), with the ID of like.
func newP384Workload(t testing.TB, like workload) workload {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		URIs: like.cert.URIs}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return workload{id: like.id, cert: cert, key: key}
}

const es256Header = `{"alg":"ES256","typ":"JWT"}`

// token is what a workload's SDK token generator makes: sub its own ID,
// aud the peer's, signed with its key.
func (w workload) token(t testing.TB, aud string, exp time.Time) string {
	t.Helper()
	return jwt(t, es256Header, map[string]any{"sub": w.id, "aud": []string{aud}, "exp": exp.Unix()}, w.key)
}

// chainToken is token with w's certificate in the header (x5c), as
// pkg/nsm/clientproof's generator signs.
func (w workload) chainToken(t testing.TB, aud string, exp time.Time) string {
	t.Helper()
	header := `{"alg":"ES256","typ":"JWT","x5c":["` + base64.StdEncoding.EncodeToString(w.cert.Raw) + `"]}`
	return jwt(t, header, map[string]any{"sub": w.id, "aud": []string{aud}, "exp": exp.Unix()}, w.key)
}

// tlsPeer is a gRPC peer whose TLS certificate is cert (none if nil).
func tlsPeer(cert *x509.Certificate) *peer.Peer {
	state := tls.ConnectionState{}
	if cert != nil {
		state.PeerCertificates = []*x509.Certificate{cert}
	}
	return &peer.Peer{AuthInfo: credentials.TLSInfo{State: state}}
}

// path builds a path of the tokens, with index.
func path(index uint32, tokens ...string) *networkservice.Path {
	p := &networkservice.Path{Index: index}
	for i, tok := range tokens {
		p.PathSegments = append(p.PathSegments, &networkservice.PathSegment{Name: string(rune('a' + i)), Id: string(rune('A' + i)), Token: tok})
	}
	return p
}
