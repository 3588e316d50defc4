package spiffeauthz

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpccreds "google.golang.org/grpc/credentials"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	proxyPath = "/ns/causeway/sa/proxy-trench-a"
	ipamPath  = "/ns/causeway/sa/ipam-trench-a"
)

// source is what a workload API X.509 source provides.
type source interface {
	x509svid.Source
	x509bundle.Source
}

// rotating is an SVID source whose SVID can be replaced, as the workload
// API does when SPIRE rotates it.
type rotating struct {
	mu  sync.Mutex
	cur *testutil.SVIDSource
}

func (r *rotating) set(s *testutil.SVIDSource) { r.mu.Lock(); r.cur = s; r.mu.Unlock() }
func (r *rotating) get() *testutil.SVIDSource {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}
func (r *rotating) GetX509SVID() (*x509svid.SVID, error) { return r.get().GetX509SVID() }
func (r *rotating) GetX509BundleForTrustDomain(td spiffeid.TrustDomain) (*x509bundle.Bundle, error) {
	return r.get().GetX509BundleForTrustDomain(td)
}

// server is an IPAM and configuration server stub behind mTLS and an
// Authorizer; it reports the serial of each caller's certificate.
type server struct {
	ipamv1.UnimplementedIpamServer
	nspv1.UnimplementedConfigurationManagerServer
	vips    chan *nspv1.VipResponse
	serials chan string
}

func (s *server) Allocate(ctx context.Context, _ *ipamv1.Child) (*ipamv1.Prefix, error) {
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(grpccreds.TLSInfo); ok {
			select {
			case s.serials <- info.State.PeerCertificates[0].SerialNumber.String():
			default:
			}
		}
	}
	return &ipamv1.Prefix{Address: "172.16.0.1", PrefixLength: 24}, nil
}

func (s *server) WatchVip(_ *nspv1.Vip, stream nspv1.ConfigurationManager_WatchVipServer) error {
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case r := <-s.vips:
			if err := stream.Send(r); err != nil {
				return err
			}
		}
	}
}

// serve starts the stub with src's SVID, authorizing by rules (its own
// trust domain that of src's SVID), and returns its address and log.
func serve(t *testing.T, src source, rules ...string) (string, *server, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	svc := &server{vips: make(chan *nspv1.VipResponse), serials: make(chan string, 10)}
	parsed, err := ParseRules(rules)
	require.NoError(t, err)
	own := func() spiffeid.TrustDomain {
		svid, err := src.GetX509SVID()
		require.NoError(t, err)
		return svid.ID.TrustDomain()
	}
	opts := append([]grpc.ServerOption{grpc.Creds(grpccreds.NewTLS(tlsconfig.MTLSServerConfig(src, src, tlsconfig.AuthorizeAny())))},
		New(parsed, own, logger).ServerOptions()...)
	gs := grpc.NewServer(opts...)
	ipamv1.RegisterIpamServer(gs, svc)
	nspv1.RegisterConfigurationManagerServer(gs, svc)
	healthpb.RegisterHealthServer(gs, grpchealth.NewServer())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(l) }()
	t.Cleanup(func() { gs.Stop(); <-done })
	return l.Addr().String(), svc, &logs
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func dial(t *testing.T, addr string, tc *tls.Config) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(grpccreds.NewTLS(tc)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func allocate(conn *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := ipamv1.NewIpamClient(conn).Allocate(ctx, &ipamv1.Child{Name: "bridge"})
	return err
}

func TestCallersAreAuthorizedBySPIFFEID(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "causeway.test")
	serverSrc := ca.Mint(t, ipamPath)
	addr, _, logs := serve(t, serverSrc, "spiffe://causeway.test"+proxyPath)
	serverID := serverSrc.SVID.ID

	// The proxy's ID is served.
	proxy := ca.Mint(t, proxyPath)
	require.NoError(t, allocate(dial(t, addr, tlsconfig.MTLSClientConfig(proxy, proxy, tlsconfig.AuthorizeID(serverID)))))

	// Another ID of the trust domain: PermissionDenied, logged; health stays open.
	other := ca.Mint(t, "/ns/causeway/sa/intruder")
	conn := dial(t, addr, tlsconfig.MTLSClientConfig(other, other, tlsconfig.AuthorizeID(serverID)))
	err := allocate(conn)
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.Contains(t, logs.String(), "refused an unauthorized caller")
	require.Contains(t, logs.String(), "spiffe://causeway.test/ns/causeway/sa/intruder")
	hr, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, hr.GetStatus())

	// No SVID: the handshake fails.
	noSVID := tlsconfig.TLSClientConfig(serverSrc, tlsconfig.AuthorizeID(serverID))
	err = allocate(dial(t, addr, noSVID))
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)

	// The proxy's path in another trust domain: the server has no bundle
	// for it, the handshake fails.
	foreignCA := testutil.NewSPIFFECA(t, "elsewhere.test")
	foreign := foreignCA.Mint(t, proxyPath)
	bundles := x509bundle.NewSet(serverSrc.Bundle, foreign.Bundle)
	err = allocate(dial(t, addr, tlsconfig.MTLSClientConfig(foreign, bundles, tlsconfig.AuthorizeID(serverID))))
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
}

// TestRotationKeepsOpenConnections rotates the SVIDs of both sides while a
// watch stream is open: the stream keeps delivering, calls on the same
// connection go on, and a new connection presents the new certificate.
func TestRotationKeepsOpenConnections(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "causeway.test")
	serverSrc := &rotating{cur: ca.Mint(t, ipamPath)}
	addr, svc, _ := serve(t, serverSrc, proxyPath)
	serverID := spiffeid.RequireFromString("spiffe://causeway.test" + ipamPath)
	client := &rotating{cur: ca.Mint(t, proxyPath)}
	tc := func() *tls.Config { return tlsconfig.MTLSClientConfig(client, client, tlsconfig.AuthorizeID(serverID)) }
	conn := dial(t, addr, tc())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := nspv1.NewConfigurationManagerClient(conn).WatchVip(ctx, &nspv1.Vip{})
	require.NoError(t, err)
	svc.vips <- &nspv1.VipResponse{Vips: []*nspv1.Vip{{Name: "before"}}}
	r, err := stream.Recv()
	require.NoError(t, err)
	require.Equal(t, "before", r.GetVips()[0].GetName())
	require.NoError(t, allocate(conn))
	oldSerial := <-svc.serials

	serverSrc.set(ca.Mint(t, ipamPath))
	client.set(ca.Mint(t, proxyPath))

	svc.vips <- &nspv1.VipResponse{Vips: []*nspv1.Vip{{Name: "after"}}}
	r, err = stream.Recv()
	require.NoError(t, err, "the open stream survives the rotation")
	require.Equal(t, "after", r.GetVips()[0].GetName())
	require.NoError(t, allocate(conn), "the open connection survives the rotation")
	require.Equal(t, oldSerial, <-svc.serials, "the open connection keeps its handshake")

	fresh := dial(t, addr, tc())
	require.NoError(t, allocate(fresh))
	require.NotEqual(t, oldSerial, <-svc.serials, "a new connection presents the rotated SVID")
}
