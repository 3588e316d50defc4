package credentials_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"io"
	"log/slog"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// source is a fixed SVID and bundle, minted in-process (no SPIRE).
type source struct {
	svid   *x509svid.SVID
	bundle *x509bundle.Bundle
}

func (s *source) GetX509SVID() (*x509svid.SVID, error) { return s.svid, nil }
func (s *source) GetX509BundleForTrustDomain(td spiffeid.TrustDomain) (*x509bundle.Bundle, error) {
	return s.bundle.GetX509BundleForTrustDomain(td)
}

func mint(t *testing.T) *source {
	t.Helper()
	td := spiffeid.RequireTrustDomainFromString("causeway.test")
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		URIs: []*url.URL{td.ID().URL()},
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)

	id := spiffeid.RequireFromPath(td, "/proxy")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "proxy"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{id.URL()},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(leafDER)
	require.NoError(t, err)
	return &source{
		svid:   &x509svid.SVID{ID: id, Certificates: []*x509.Certificate{leaf}, PrivateKey: key},
		bundle: x509bundle.FromX509Authorities(td, []*x509.Certificate{ca}),
	}
}

// serve runs a health server with the given options and records the
// authorization metadata of the last call.
func serve(t *testing.T, opts ...grpc.ServerOption) (addr string, lastToken func() string) {
	t.Helper()
	tokens := make(chan string, 100)
	opts = append(opts, grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		tokens <- strings.Join(md.Get("nsm-client-token"), ",")
		return h(ctx, req)
	}))
	s := testutil.ServeGRPC(t, "", func(s *grpc.Server) { healthpb.RegisterHealthServer(s, health.NewServer()) }, opts...)
	return s.Addr, func() string {
		select {
		case tok := <-tokens:
			return tok
		default:
			return ""
		}
	}
}

func check(t *testing.T, addr string, opts ...grpc.DialOption) error {
	t.Helper()
	cc, err := grpc.NewClient(addr, opts...)
	require.NoError(t, err)
	defer func() { _ = cc.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func TestMutualTLS(t *testing.T) {
	c := credentials.FromSource(mint(t), time.Hour)
	require.True(t, c.Secure())
	require.NoError(t, c.Validate())
	addr, _ := serve(t, grpc.Creds(c.ServerTransportCredentials()))

	require.NoError(t, check(t, addr, grpc.WithTransportCredentials(c.ClientTransportCredentials())))
	require.Error(t, check(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials())),
		"a plaintext client must not reach an mTLS server")
	other := credentials.FromSource(mint(t), time.Hour) // another trust root
	require.Error(t, check(t, addr, grpc.WithTransportCredentials(other.ClientTransportCredentials())),
		"a client from another trust root must be refused")
}

func TestNSMDialOptionsSendSignedToken(t *testing.T) {
	c := credentials.FromSource(mint(t), time.Hour)
	addr, lastToken := serve(t, c.NSMServerOptions()...)
	require.NoError(t, check(t, addr, c.NSMDialOptions()...))
	tok := lastToken()
	require.Len(t, strings.Split(tok, "."), 3, "the NSM token is a JWT, got %q", tok)

	_, exp, err := c.TokenGenerator()(nil)
	require.NoError(t, err)
	require.True(t, exp.After(time.Now()))
}

func TestInsecureSendsTokenOverPlaintext(t *testing.T) {
	c := credentials.Insecure(slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour)
	require.False(t, c.Secure())
	require.ErrorIs(t, c.Validate(), credentials.ErrNoSource)
	addr, lastToken := serve(t, c.NSMServerOptions()...)
	require.NoError(t, check(t, addr, c.NSMDialOptions()...))
	tok := lastToken()
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3, "an unsigned JWT, got %q", tok)
	claims, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	require.Contains(t, string(claims), `"sub":"spiffe://causeway.local/insecure"`)
	require.Empty(t, parts[2], "no signature")
}

func TestNewWithoutWorkloadAPIFails(t *testing.T) {
	t.Setenv("SPIFFE_ENDPOINT_SOCKET", "unix:///nonexistent/causeway-test.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := credentials.New(ctx, credentials.Config{MaxTokenLifetime: time.Hour})
	require.Error(t, err, "without a reachable workload API there are no SPIFFE credentials")

	c, err := credentials.New(ctx, credentials.Config{Insecure: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	require.False(t, c.Secure())
}
