package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/proto/spiffe/workload"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
)

// SPIFFECA is an in-process SPIFFE trust root that mints ECDSA X.509-SVIDs
// (what a SPIRE server would do).
type SPIFFECA struct {
	td     spiffeid.TrustDomain
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial atomic.Int64
}

func NewSPIFFECA(t testing.TB, trustDomain string) *SPIFFECA {
	t.Helper()
	td := spiffeid.RequireTrustDomainFromString(trustDomain)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: trustDomain + " CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		URIs: []*url.URL{td.ID().URL()},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	ca := &SPIFFECA{td: td, cert: cert, key: key}
	ca.serial.Store(1)
	return ca
}

// SVIDSource is one workload's SVID plus its trust domain's bundle; it
// implements credentials.Source.
type SVIDSource struct {
	SVID   *x509svid.SVID
	Bundle *x509bundle.Bundle
}

func (s *SVIDSource) GetX509SVID() (*x509svid.SVID, error) { return s.SVID, nil }
func (s *SVIDSource) GetX509BundleForTrustDomain(td spiffeid.TrustDomain) (*x509bundle.Bundle, error) {
	return s.Bundle.GetX509BundleForTrustDomain(td)
}

// Mint issues the SVID of spiffe://<td><path>.
func (ca *SPIFFECA) Mint(t testing.TB, path string) *SVIDSource {
	t.Helper()
	id := spiffeid.RequireFromPath(ca.td, path)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial.Add(1)),
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(12 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageKeyAgreement,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{id.URL()},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &SVIDSource{
		SVID:   &x509svid.SVID{ID: id, Certificates: []*x509.Certificate{leaf}, PrivateKey: key},
		Bundle: x509bundle.FromX509Authorities(ca.td, []*x509.Certificate{ca.cert}),
	}
}

// workloadAPI is a fake SPIFFE Workload API (the part a SPIRE agent serves
// to NewX509Source): it streams one X.509-SVID response and then holds the
// stream open until the client leaves or the server stops.
type workloadAPI struct {
	workload.UnimplementedSpiffeWorkloadAPIServer
	resp *workload.X509SVIDResponse
}

func (w *workloadAPI) FetchX509SVID(_ *workload.X509SVIDRequest, stream workload.SpiffeWorkloadAPI_FetchX509SVIDServer) error {
	if err := stream.Send(w.resp); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

// ServeWorkloadAPI serves src (and more, after it in the response, as an
// agent does for a workload that several entries select) over a unix
// socket until the test ends and returns the SPIFFE_ENDPOINT_SOCKET value.
func ServeWorkloadAPI(t *testing.T, src *SVIDSource, more ...*SVIDSource) string {
	t.Helper()
	api := &workloadAPI{resp: &workload.X509SVIDResponse{}}
	for _, s := range append([]*SVIDSource{src}, more...) {
		keyDER, err := x509.MarshalPKCS8PrivateKey(s.SVID.PrivateKey)
		require.NoError(t, err)
		var bundleDER []byte
		for _, c := range s.Bundle.X509Authorities() {
			bundleDER = append(bundleDER, c.Raw...)
		}
		api.resp.Svids = append(api.resp.Svids, &workload.X509SVID{
			SpiffeId: s.SVID.ID.String(), X509Svid: s.SVID.Certificates[0].Raw,
			X509SvidKey: keyDER, Bundle: bundleDER,
		})
	}
	// A short directory: unix socket paths are limited to ~108 bytes.
	dir, err := os.MkdirTemp("", "cw-wl")
	require.NoError(t, err)
	sock := filepath.Join(dir, "agent.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) }) // after the server stops
	ServeGRPCOn(t, l, func(s *grpc.Server) { workload.RegisterSpiffeWorkloadAPIServer(s, api) })
	return "unix://" + sock
}
