package ipamd

import (
	"context"
	"log/slog"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
)

// TestRunAuthorizesCallersBySPIFFEID: with IPAM_AUTHORIZED_IDS, the proxy's
// ID is served over mTLS and any other ID of the trust domain is refused
// with PermissionDenied.
func TestRunAuthorizesCallersBySPIFFEID(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "causeway.test")
	ipamSVID := ca.Mint(t, "/ns/cw/sa/ipam")
	sock := testutil.ServeWorkloadAPI(t, ipamSVID)
	cfg := testConfig(t)
	t.Setenv("SPIFFE_ENDPOINT_SOCKET", sock)
	cfg.Insecure = false
	cfg.AuthorizedIDs = []string{"spiffe://causeway.test/ns/cw/sa/proxy"}
	_, _, stop := start(t, cfg)

	// The proxy's own client credentials (pkg/nsm/credentials).
	creds := credentials.FromSource(ca.Mint(t, "/ns/cw/sa/proxy"), time.Hour)
	conn, err := grpc.NewClient(net.JoinHostPort(cfg.ListenAddress, strconv.Itoa(cfg.Port)),
		grpc.WithTransportCredentials(creds.ClientTransportCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	assert.Equal(t, "169.255.0.1/24", allocate(t, ipamv1.NewIpamClient(conn), ipamv1.IPFamily_IPV4, "a"))

	other := mtlsClient(t, cfg, ca.Mint(t, "/ns/cw/sa/other"), ipamSVID.SVID.ID)
	_, err = other.Allocate(context.Background(), &ipamv1.Child{Name: "bridge", Subnet: &ipamv1.Subnet{
		Conduit: &nspv1.Conduit{Name: "a", Trench: &nspv1.Trench{Name: "default"}}, Node: "worker"}})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.NoError(t, stop())
}

// TestRunAuthorizesNSMPodIDsInItsOwnTrustDomain: with the rules the chart
// writes for NSM's SPIRE (a path pattern of the proxies' pods, no trust
// domain), the IPAM takes the trust domain from its own SVID: a proxy pod
// of that domain is served, a neighbour pod is refused with its ID named.
func TestRunAuthorizesNSMPodIDsInItsOwnTrustDomain(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "k8s.nsm")
	ipamSVID := ca.Mint(t, "/ns/cw/pod/ipam-a-0")
	sock := testutil.ServeWorkloadAPI(t, ipamSVID)
	cfg := testConfig(t)
	t.Setenv("SPIFFE_ENDPOINT_SOCKET", sock)
	cfg.Insecure = false
	cfg.AuthorizedIDs = []string{"/ns/cw/sa/proxy-a", "/ns/cw/pod/proxy-a-lb-[a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9]"}
	_, _, stop := start(t, cfg)

	proxy := mtlsClient(t, cfg, ca.Mint(t, "/ns/cw/pod/proxy-a-lb-x7k2q"), ipamSVID.SVID.ID)
	assert.Equal(t, "169.255.0.1/24", allocate(t, proxy, ipamv1.IPFamily_IPV4, "lb"))

	child := &ipamv1.Child{Name: "bridge", Subnet: &ipamv1.Subnet{
		Conduit: &nspv1.Conduit{Name: "lb", Trench: &nspv1.Trench{Name: "default"}}, Node: "worker"}}
	neighbour := mtlsClient(t, cfg, ca.Mint(t, "/ns/cw/pod/web-5d8c7-x7k2q"), ipamSVID.SVID.ID)
	_, err := neighbour.Allocate(context.Background(), child)
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "spiffe://k8s.nsm/ns/cw/pod/web-5d8c7-x7k2q")
	require.NoError(t, stop())
}

// TestRunNeedsSPIFFEOrAnExplicitInsecure: without SPIFFE_ENDPOINT_SOCKET,
// Run refuses to serve plain gRPC unless IPAM_INSECURE asks for it.
func TestRunNeedsSPIFFEOrAnExplicitInsecure(t *testing.T) {
	cfg := testConfig(t)
	cfg.Insecure = false
	err := Run(context.Background(), cfg, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "IPAM_INSECURE=true")
	var exit *daemon.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 2, exit.Status, "a configuration error")
	_, err = os.Stat(cfg.Datasource)
	require.ErrorIs(t, err, os.ErrNotExist, "no store is created by an IPAM that cannot serve")
}

func TestConfigRefusesBadAuthorizedIDs(t *testing.T) {
	c := testConfig(t)
	c.AuthorizedIDs = []string{"proxy"}
	require.ErrorContains(t, c.Validate(), "IPAM_AUTHORIZED_IDS")
	c.AuthorizedIDs = []string{"spiffe://td/proxy"}
	require.ErrorContains(t, c.Validate(), "IPAM_INSECURE=true", "no authorization without mTLS")
	c.Insecure = false
	require.NoError(t, c.Validate())
}
