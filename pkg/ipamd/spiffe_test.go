package ipamd

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"

	"github.com/causeway-net/causeway/internal/testutil"
)

// mtlsClient dials the IPAM of cfg with src's SVID, accepting only a
// server whose SPIFFE ID is serverID.
func mtlsClient(t *testing.T, cfg *Config, src *testutil.SVIDSource, serverID spiffeid.ID) ipamv1.IpamClient {
	t.Helper()
	conn, err := grpc.NewClient(net.JoinHostPort(cfg.ListenAddress, strconv.Itoa(cfg.Port)),
		grpc.WithTransportCredentials(grpccreds.NewTLS(tlsconfig.MTLSClientConfig(src, src, tlsconfig.AuthorizeID(serverID)))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return ipamv1.NewIpamClient(conn)
}

// nspPeers serves a configuration server over mTLS with src's SVID that
// answers nothing but reports the SPIFFE ID of every caller.
func nspPeers(t *testing.T, src *testutil.SVIDSource) (string, <-chan string) {
	t.Helper()
	ids := make(chan string, 100)
	s := testutil.ServeGRPC(t, "", func(s *grpc.Server) {
		nspv1.RegisterConfigurationManagerServer(s, nspv1.UnimplementedConfigurationManagerServer{})
	},
		grpc.Creds(grpccreds.NewTLS(tlsconfig.MTLSServerConfig(src, src, tlsconfig.AuthorizeAny()))),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if p, ok := peer.FromContext(ss.Context()); ok {
				if info, ok := p.AuthInfo.(grpccreds.TLSInfo); ok && len(info.State.PeerCertificates) > 0 {
					if id, err := x509svid.IDFromCert(info.State.PeerCertificates[0]); err == nil {
						select {
						case ids <- id.String():
						default:
						}
					}
				}
			}
			return h(srv, ss)
		}))
	return s.Addr, ids
}

// TestRunServesSPIFFEMutualTLS: with SPIFFE_ENDPOINT_SOCKET set (here a fake
// agent serving a minted SVID), Run serves ipam.v1.Ipam over mTLS as the
// agent's identity, refuses plaintext clients and clients of another trust
// root, and dials the configuration server over mTLS as well.
func TestRunServesSPIFFEMutualTLS(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "causeway.test")
	nspAddr, nspCallers := nspPeers(t, ca.Mint(t, "/nsp"))
	ipamSVID := ca.Mint(t, "/ipam")
	sock := testutil.ServeWorkloadAPI(t, ipamSVID) // registered first: outlives Run
	cfg := testConfig(t)
	t.Setenv("SPIFFE_ENDPOINT_SOCKET", sock)
	cfg.Insecure = false
	cfg.NSPService = nspAddr
	plain, _, stop := start(t, cfg)

	proxy := mtlsClient(t, cfg, ca.Mint(t, "/proxy"), ipamSVID.SVID.ID)
	assert.Equal(t, "169.255.0.1/24", allocate(t, proxy, ipamv1.IPFamily_IPV4, "a"))
	select {
	case id := <-nspCallers:
		require.Equal(t, "spiffe://causeway.test/ipam", id, "the IPAM dials the NSP with its SVID")
	case <-time.After(waitFor):
		t.Fatal("the IPAM never reached the NSP over mTLS")
	}

	child := &ipamv1.Child{Name: "bridge", Subnet: &ipamv1.Subnet{
		Conduit: &nspv1.Conduit{Name: "a", Trench: &nspv1.Trench{Name: "default"}}, Node: "worker", IpFamily: ipamv1.IPFamily_IPV4,
	}}
	_, err := plain.Allocate(context.Background(), child)
	require.Equal(t, codes.Unavailable, status.Code(err), "a plaintext client is refused: %v", err)

	// An impostor that trusts our CA but holds another CA's SVID: only the
	// server's check of client certificates can refuse it.
	rogue := testutil.NewSPIFFECA(t, "causeway.test")
	impostor := &testutil.SVIDSource{SVID: rogue.Mint(t, "/proxy").SVID, Bundle: ipamSVID.Bundle}
	_, err = mtlsClient(t, cfg, impostor, ipamSVID.SVID.ID).Allocate(context.Background(), child)
	require.Equal(t, codes.Unavailable, status.Code(err), "a client of another CA is refused: %v", err)

	// A client expecting another server identity refuses this IPAM.
	_, err = mtlsClient(t, cfg, ca.Mint(t, "/proxy"), spiffeid.RequireFromString("spiffe://causeway.test/other")).Allocate(context.Background(), child)
	require.Equal(t, codes.Unavailable, status.Code(err), "the server identity comes from the workload API: %v", err)

	assert.Equal(t, "169.255.0.1/24", allocate(t, proxy, ipamv1.IPFamily_IPV4, "a"), "the same child keeps its address")
	require.NoError(t, stop())
}
