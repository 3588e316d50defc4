package credentials_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edwarnicke/grpcfd"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/client"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/endpoint"
	"github.com/networkservicemesh/sdk/pkg/tools/token"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/causeway-net/causeway/pkg/nsm/credentials"

	"github.com/causeway-net/causeway/internal/testutil"
)

// peerID is the SPIFFE ID of the TLS peer of a call ("" without one).
func peerID(p *peer.Peer) string {
	if p == nil {
		return ""
	}
	info, ok := p.AuthInfo.(grpccreds.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return ""
	}
	id, err := x509svid.IDFromCert(info.State.PeerCertificates[0])
	if err != nil {
		return ""
	}
	return id.String()
}

// recordPeers is a server option that reports each caller's SPIFFE ID.
func recordPeers() (grpc.ServerOption, <-chan string) {
	ids := make(chan string, 100)
	return grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		p, _ := peer.FromContext(ctx)
		ids <- peerID(p)
		return h(ctx, req)
	}), ids
}

// checkPeer makes a health Check and returns the server's SPIFFE ID as the
// client saw it.
func checkPeer(t *testing.T, addr string, opts ...grpc.DialOption) (string, error) {
	t.Helper()
	cc, err := grpc.NewClient(addr, opts...)
	require.NoError(t, err)
	defer func() { _ = cc.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var p peer.Peer
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p))
	return peerID(&p), err
}

// TestSPIFFEMutualTLSBetweenTwoWorkloads: two workloads with their own
// SVIDs from one trust root authenticate each other, each seeing the
// other's SPIFFE ID.
func TestSPIFFEMutualTLSBetweenTwoWorkloads(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "causeway.test")
	server := credentials.FromSource(ca.Mint(t, "/ipam"), time.Hour)
	client := credentials.FromSource(ca.Mint(t, "/proxy"), time.Hour)
	require.True(t, server.Secure())
	require.True(t, client.Secure())
	require.NoError(t, client.Validate())
	require.NotNil(t, client.ClientTLSConfig())
	require.NotNil(t, server.ServerTLSConfig())

	rec, callers := recordPeers()
	addr, _ := serve(t, grpc.Creds(server.ServerTransportCredentials()), rec)
	seen, err := checkPeer(t, addr, grpc.WithTransportCredentials(client.ClientTransportCredentials()))
	require.NoError(t, err)
	require.Equal(t, "spiffe://causeway.test/ipam", seen, "the client authenticates the server")
	require.Equal(t, "spiffe://causeway.test/proxy", <-callers, "the server authenticates the client")
}

// TestSPIFFERefusesForeignTrustRoots: a peer whose SVID is signed by
// another CA (even one claiming the same trust domain) is refused in both
// directions, and so is a plaintext client.
func TestSPIFFERefusesForeignTrustRoots(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "causeway.test")
	rogue := testutil.NewSPIFFECA(t, "causeway.test")
	server := credentials.FromSource(ca.Mint(t, "/ipam"), time.Hour)
	rec, callers := recordPeers()
	addr, _ := serve(t, grpc.Creds(server.ServerTransportCredentials()), rec)

	// The rogue client trusts the real CA, so only the server's check of
	// the client certificate can refuse it.
	impostor := &testutil.SVIDSource{SVID: rogue.Mint(t, "/proxy").SVID, Bundle: ca.Mint(t, "/x").Bundle}
	for name, opt := range map[string]grpc.DialOption{
		"client of another CA": grpc.WithTransportCredentials(credentials.FromSource(impostor, time.Hour).ClientTransportCredentials()),
		"plaintext client":     grpc.WithTransportCredentials(insecure.NewCredentials()),
	} {
		_, err := checkPeer(t, addr, opt)
		require.Equal(t, codes.Unavailable, status.Code(err), "%s: %v", name, err)
	}
	require.Empty(t, callers, "no refused call may reach the handler")

	// The other way round: a trusted client refuses a server of another CA.
	rogueServer := credentials.FromSource(rogue.Mint(t, "/ipam"), time.Hour)
	rogueAddr, _ := serve(t, grpc.Creds(rogueServer.ServerTransportCredentials()))
	client := credentials.FromSource(ca.Mint(t, "/proxy"), time.Hour)
	_, err := checkPeer(t, rogueAddr, grpc.WithTransportCredentials(client.ClientTransportCredentials()))
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
}

// TestSPIFFETokens: the NSM token is an ES256 JWT signed with the SVID key,
// with the caller's SPIFFE ID as subject, the callee's as audience once the
// TLS peer is known, and an expiry bounded by the maximum lifetime.
func TestSPIFFETokens(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "causeway.test")
	proxy := ca.Mint(t, "/proxy")
	const lifetime = 10 * time.Minute
	client := credentials.FromSource(proxy, lifetime)
	pub := proxy.SVID.Certificates[0].PublicKey

	before := time.Now().Truncate(time.Second)
	tok, exp, err := client.TokenGenerator()(nil)
	require.NoError(t, err)
	claims := verifyES256(t, tok, pub)
	require.Equal(t, "spiffe://causeway.test/proxy", claims.Sub)
	require.Empty(t, claims.Aud, "no peer, no audience")
	require.Equal(t, exp.Unix(), claims.Exp)
	require.False(t, exp.Before(before.Add(lifetime)))
	require.False(t, exp.After(time.Now().Add(lifetime)))

	// Over the NSM options the token names the server as its audience.
	server := credentials.FromSource(ca.Mint(t, "/nsmgr"), lifetime)
	addr, lastToken := serve(t, server.NSMServerOptions()...)
	require.NoError(t, check(t, addr, client.NSMDialOptions()...))
	claims = verifyES256(t, lastToken(), pub)
	require.Equal(t, "spiffe://causeway.test/proxy", claims.Sub)
	require.Equal(t, []string{"spiffe://causeway.test/nsmgr"}, claims.Aud)

	// The signature check is real: the token fails under another key.
	other := ca.Mint(t, "/other").SVID.Certificates[0].PublicKey
	require.False(t, es256Valid(t, tok, other))
	require.True(t, es256Valid(t, tok, pub))
}

// TestFromWorkloadAPI: credentials.New without Insecure reads the SVID from
// the workload API socket in SPIFFE_ENDPOINT_SOCKET (here a fake agent
// serving a minted SVID), does mTLS with it, and Close releases the source.
func TestFromWorkloadAPI(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "causeway.test")
	proxy := ca.Mint(t, "/proxy")
	t.Setenv("SPIFFE_ENDPOINT_SOCKET", testutil.ServeWorkloadAPI(t, proxy))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := credentials.New(ctx, credentials.Config{MaxTokenLifetime: time.Hour})
	require.NoError(t, err)
	defer func() { require.NoError(t, client.Close()) }()
	require.True(t, client.Secure())
	require.NoError(t, client.Validate())

	server := credentials.FromSource(ca.Mint(t, "/ipam"), time.Hour)
	rec, callers := recordPeers()
	addr, _ := serve(t, grpc.Creds(server.ServerTransportCredentials()), rec)
	seen, err := checkPeer(t, addr, grpc.WithTransportCredentials(client.ClientTransportCredentials()))
	require.NoError(t, err)
	require.Equal(t, "spiffe://causeway.test/ipam", seen)
	require.Equal(t, "spiffe://causeway.test/proxy", <-callers)

	tok, _, err := client.TokenGenerator()(nil)
	require.NoError(t, err)
	require.Equal(t, "spiffe://causeway.test/proxy", verifyES256(t, tok, proxy.SVID.Certificates[0].PublicKey).Sub)
}

// nseOverMTLS serves an SDK endpoint (default OPA policies through
// AuthorizeServer) on 127.0.0.1 with creds until the test ends.
func nseOverMTLS(t *testing.T, ctx context.Context, creds *credentials.Credentials) *url.URL {
	t.Helper()
	nse := endpoint.NewServer(ctx, creds.TokenGenerator(), endpoint.WithName("nse"),
		endpoint.WithAuthorizeServer(creds.AuthorizeServer()))
	s := testutil.ServeGRPC(t, "", nse.Register, creds.NSMServerOptions()...)
	return &url.URL{Scheme: "tcp", Host: s.Addr}
}

// TestSPIFFENSMRequest: an NSM client and endpoint with SVIDs of one trust
// root pass the SDK's default policies (signed, chained tokens); the same
// mTLS with an opaque token is refused by the endpoint's policies.
func TestSPIFFENSMRequest(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "causeway.test")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nseCreds := credentials.FromSource(ca.Mint(t, "/nse"), time.Hour)
	proxy := ca.Mint(t, "/proxy")
	nscCreds := credentials.FromSource(proxy, time.Hour)
	u := nseOverMTLS(t, ctx, nseCreds)

	nsc := client.NewClient(ctx, client.WithName("nsc"), client.WithClientURL(u),
		client.WithDialOptions(nscCreds.NSMDialOptions()...), client.WithDialTimeout(30*time.Second),
		client.WithAuthorizeClient(nscCreds.AuthorizeClient()), client.WithoutRefresh())
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	conn, err := nsc.Request(rctx, &networkservice.NetworkServiceRequest{
		Connection: &networkservice.Connection{Id: "c1", NetworkService: "ns"},
	})
	require.NoError(t, err)
	segs := conn.GetPath().GetPathSegments()
	require.Len(t, segs, 2)
	first := verifyES256(t, segs[0].GetToken(), proxy.SVID.Certificates[0].PublicKey)
	require.Equal(t, "spiffe://causeway.test/proxy", first.Sub)
	require.Equal(t, []string{"spiffe://causeway.test/nse"}, first.Aud, "chained to the endpoint's token")
	require.Equal(t, "spiffe://causeway.test/nse", jwtSubject(t, segs[1].GetToken()))
	_, err = nsc.Close(rctx, conn)
	require.NoError(t, err)

	// Same mTLS, but an opaque token: the endpoint's policies refuse it.
	opaque := func(grpccreds.AuthInfo) (string, time.Time, error) { return "opaque", time.Now().Add(time.Hour), nil }
	cc, err := grpc.NewClient(u.Host,
		grpc.WithTransportCredentials(grpcfd.TransportCredentials(nscCreds.ClientTransportCredentials())),
		grpc.WithDefaultCallOptions(grpc.PerRPCCredentials(token.NewPerRPCCredentials(opaque))))
	require.NoError(t, err)
	defer func() { _ = cc.Close() }()
	_, err = networkservice.NewNetworkServiceClient(cc).Request(rctx, &networkservice.NetworkServiceRequest{
		Connection: &networkservice.Connection{Id: "c2", NetworkService: "ns",
			Path: &networkservice.Path{PathSegments: []*networkservice.PathSegment{{Name: "nsc", Id: "c2", Token: "opaque", Expires: timestamppb.New(time.Now().Add(time.Hour))}}}},
	})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
}

// jwtSubject reads the subject of a JWT without checking it.
func jwtSubject(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3, "a JWT, got %q", tok)
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var c jwtClaims
	require.NoError(t, json.Unmarshal(payload, &c))
	return c.Sub
}
