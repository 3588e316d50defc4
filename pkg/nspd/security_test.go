package nspd

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
)

// TestRunNeedsSPIFFEOrAnExplicitInsecure: without SPIFFE_ENDPOINT_SOCKET,
// Run refuses to serve plain gRPC unless NSP_INSECURE asks for it.
func TestRunNeedsSPIFFEOrAnExplicitInsecure(t *testing.T) {
	t.Setenv("SPIFFE_ENDPOINT_SOCKET", "")
	path := filepath.Join(t.TempDir(), "nsp.yaml")
	writeFile(t, path, yaml)
	err := Run(context.Background(), &Config{ConfigFile: path}, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "NSP_INSECURE=true")
}

func TestValidateAuthorizedIDs(t *testing.T) {
	c := &Config{LogLevel: "INFO", Port: 7778, ConfigFile: "nsp.yaml", ConfigPollInterval: time.Second, AuthorizedIDs: []string{"proxy"}}
	require.ErrorContains(t, c.Validate(), "NSP_AUTHORIZED_IDS")
	c.AuthorizedIDs = []string{"spiffe://td/proxy"}
	require.NoError(t, c.Validate())
	c.Insecure = true
	require.ErrorContains(t, c.Validate(), "NSP_INSECURE=true")
}

// TestRunAuthorizesTheProxyOverMTLS: with SPIFFE and NSP_AUTHORIZED_IDS, a
// proxy with the proxy's own client credentials (pkg/nsm/credentials) watches
// the VIPs over mTLS; another ID of the trust domain is refused with
// PermissionDenied.
func TestRunAuthorizesTheProxyOverMTLS(t *testing.T) {
	ca := testutil.NewSPIFFECA(t, "causeway.test")
	sock := testutil.ServeWorkloadAPI(t, ca.Mint(t, "/ns/cw/sa/nsp"))
	t.Setenv("SPIFFE_ENDPOINT_SOCKET", sock)
	path := filepath.Join(t.TempDir(), "nsp.yaml")
	writeFile(t, path, yaml)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	cfg := &Config{ConfigFile: path, Port: port, ConfigPollInterval: time.Hour, LogLevel: "INFO", GracePeriod: time.Second,
		AuthorizedIDs: []string{"spiffe://causeway.test/ns/cw/sa/proxy"}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	watch := func(svid string) (*nspv1.VipResponse, error) {
		creds := credentials.FromSource(ca.Mint(t, svid), time.Hour)
		conn, err := grpc.NewClient(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			grpc.WithTransportCredentials(creds.ClientTransportCredentials()))
		require.NoError(t, err)
		defer conn.Close()
		wctx, wcancel := context.WithTimeout(ctx, waitFor)
		defer wcancel()
		stream, err := nspv1.NewConfigurationManagerClient(conn).WatchVip(wctx,
			&nspv1.Vip{Trench: &nspv1.Trench{Name: "t"}}, grpc.WaitForReady(true))
		if err != nil {
			return nil, err
		}
		return stream.Recv()
	}
	resp, err := watch("/ns/cw/sa/proxy")
	require.NoError(t, err)
	require.Equal(t, "20.0.0.1/32", resp.GetVips()[0].GetAddress())
	_, err = watch("/ns/cw/sa/other")
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
}
