package ipamd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/internal/logging"
	"github.com/causeway-net/causeway/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const waitFor = 30 * time.Second

// testConfig is the default configuration on 127.0.0.1 free ports, with a
// fresh database and no configuration server.
func testConfig(t *testing.T) *Config {
	t.Helper()
	t.Setenv("SPIFFE_ENDPOINT_SOCKET", "")
	c, err := Load()
	require.NoError(t, err)
	c.ListenAddress = "127.0.0.1"
	ports := testutil.FreePorts(t, 2)
	c.Port, c.MetricsPort = ports[0], ports[1]
	c.NSPService = ""
	c.Datasource = filepath.Join(t.TempDir(), "data", "registry.db")
	c.Insecure = true // plain gRPC is asked for explicitly
	return c
}

// start runs Run in the background; the returned function stops it and
// returns its error.
func start(t *testing.T, cfg *Config) (ipamv1.IpamClient, *grpc.ClientConn, func() error) {
	t.Helper()
	logger, _ := logging.New(t.Output(), "ipam", slog.LevelDebug)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, logger) }()
	conn, err := grpc.NewClient(net.JoinHostPort(cfg.ListenAddress, strconv.Itoa(cfg.Port)),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	stop := sync.OnceValue(func() error {
		_ = conn.Close()
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(waitFor):
			t.Error("Run did not return")
			return nil
		}
	})
	t.Cleanup(func() { _ = stop() })
	return ipamv1.NewIpamClient(conn), conn, stop
}

func allocate(t *testing.T, c ipamv1.IpamClient, fam ipamv1.IPFamily, conduit string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	// WaitForReady: the server may still be starting.
	p, err := c.Allocate(ctx, &ipamv1.Child{Name: "bridge", Subnet: &ipamv1.Subnet{
		Conduit: &nspv1.Conduit{Name: conduit, Trench: &nspv1.Trench{Name: "default"}}, Node: "worker", IpFamily: fam,
	}}, grpc.WaitForReady(true))
	require.NoError(t, err)
	return fmt.Sprintf("%s/%d", p.GetAddress(), p.GetPrefixLength())
}

// scrape returns the IPAM's metrics page. Run starts the metrics server
// after the gRPC one, so a refused connection is tried again, up to
// waitFor (a bound on "it happened at all").
func scrape(t *testing.T, port int) string {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	resp, err := client.Get(url)
	for deadline := time.Now().Add(waitFor); err != nil && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		resp, err = client.Get(url)
	}
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return string(body)
}

// TestRunServesAndKeepsAllocationsAcrossRestart: Run serves ipam.v1.Ipam,
// health and metrics, stops when its context ends, and a second Run on the
// same database hands the same subnets out again.
func TestRunServesAndKeepsAllocationsAcrossRestart(t *testing.T) {
	cfg := testConfig(t)
	client, conn, stop := start(t, cfg)
	assert.Equal(t, "169.255.0.1/24", allocate(t, client, ipamv1.IPFamily_IPV4, "a"))
	assert.Equal(t, "169.255.16.1/24", allocate(t, client, ipamv1.IPFamily_IPV4, "b"))
	assert.Equal(t, "fd00::1/64", allocate(t, client, ipamv1.IPFamily_IPV6, "b"))

	hr, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "ipam.v1.Ipam"})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, hr.GetStatus())

	m := scrape(t, cfg.MetricsPort)
	assert.Contains(t, m, `causeway_ipam_rpc_requests_total{code="OK",method="/ipam.v1.Ipam/Allocate"} 3`)
	assert.Contains(t, m, `causeway_ipam_conduits{family="ipv4",trench="default"} 2`)
	assert.Contains(t, m, "go_goroutines")
	require.NoError(t, stop(), "a stop on context end is no failure")

	// Restart: b first; it gets its old subnet, not the first free one.
	client, _, stop = start(t, cfg)
	assert.Equal(t, "169.255.16.1/24", allocate(t, client, ipamv1.IPFamily_IPV4, "b"))
	assert.Equal(t, "169.255.0.1/24", allocate(t, client, ipamv1.IPFamily_IPV4, "a"))
	require.NoError(t, stop())
}

// TestRunFailsOnTakenPort: Run returns the listen error and closes the store
// on its way out (a second Run can open the database at once).
func TestRunFailsOnTakenPort(t *testing.T) {
	cfg := testConfig(t)
	l, err := net.Listen("tcp", net.JoinHostPort(cfg.ListenAddress, strconv.Itoa(cfg.Port)))
	require.NoError(t, err)
	err = Run(context.Background(), cfg, slog.New(slog.DiscardHandler))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listen:")
	require.NoError(t, l.Close())

	client, _, stop := start(t, cfg)
	assert.Equal(t, "169.255.0.1/24", allocate(t, client, ipamv1.IPFamily_IPV4, "a"))
	require.NoError(t, stop())
}

func TestRunRejectsInvalidConfig(t *testing.T) {
	cfg := testConfig(t)
	cfg.IPFamily = "ipx"
	err := Run(context.Background(), cfg, slog.New(slog.DiscardHandler))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "IPAM_IP_FAMILY")
}

// A datasource that is a directory is refused, named once.
func TestRunRefusesADirectoryAsStore(t *testing.T) {
	cfg := testConfig(t)
	cfg.Datasource = t.TempDir()
	err := Run(context.Background(), cfg, slog.New(slog.DiscardHandler))
	require.EqualError(t, err, "IPAM_DATASOURCE must name the store file: read "+cfg.Datasource+": is a directory")
	var exit *daemon.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 2, exit.Status, "a configuration error")
}
