package proxyd_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/sendfd"
	"github.com/stretchr/testify/require"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/health"
	"github.com/causeway-net/causeway/pkg/nsm/nsmtest"
	"github.com/causeway-net/causeway/pkg/proxyd"
)

const vipFile = `
trenches:
  - name: trench-a
vips:
  - name: vip-1
    address: %s
    trench: trench-a
`

func writeVIPs(t *testing.T, path, vip string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(sprintf(vipFile, vip)), 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

// TestRunDeploymentShape runs the daemon as cmd/proxy does (Run until the
// context ends) in the deployment's shape: the NSMgr on a unix socket, the
// endpoint on a unix socket in a fresh temporary directory (the default),
// registered and reached by passing its file descriptor, and the VIPs
// taken from a watched file instead of the NSP.
func TestRunDeploymentShape(t *testing.T) {
	e := newEnv(t, nsmtest.WithUnixSockets())
	cfg := e.config(t, 20*time.Second)
	cfg.ListenOn = ""
	cfg.NSPService = "127.0.0.1:1" // not used with a VIP file
	cfg.VIPFile = filepath.Join(e.dir, "vips.yaml")
	writeVIPs(t, cfg.VIPFile, "20.0.0.1/32")
	l, _, _ := e.addLB("lb-1")

	dp := newFakeDataplane()
	e.kernel.set(dp)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- proxyd.Run(ctx, cfg, quietLogger(), proxyd.WithDataplane(dp), proxyd.WithoutSDKLogger())
	}()

	require.Eventually(t, func() bool {
		return healthStatus(t, cfg.HealthSocket, health.Readiness) == healthpb.HealthCheckResponse_SERVING
	}, wait, tick)
	require.Len(t, l.Open(), 1)
	require.Eventually(t, func() bool {
		s := lastState(dp)
		return len(s.Nexthops) == 2 && len(s.Ports) == 1 && sprint(s.VIPs) == "[20.0.0.1/32]"
	}, wait, tick, "last state %+v", lastState(dp))

	nsc := e.targetClient(sendfd.NewClient())
	rctx, rcancel := context.WithTimeout(e.ctx, wait)
	defer rcancel()
	target, err := nsc.Request(rctx, targetRequest("target-1", nil))
	require.NoError(t, err)
	require.Equal(t, proxyName, target.GetNetworkServiceEndpointName())
	require.Equal(t, []string{"172.16.0.1/24", "fd00::1/64"}, target.GetContext().GetIpContext().GetExtraPrefixes())
	requireOnePerSubnet(t, mustPrefixes(t, target.GetContext().GetIpContext().GetSrcIpAddrs()),
		nodeSubnets(mustPrefixes(t, []string{"172.16.0.1/24", "fd00::1/64"})))
	require.Eventually(t, func() bool { return len(lastState(dp).Ports) == 2 }, wait, tick)

	// An edit of the VIP file reaches the dataplane.
	writeVIPs(t, cfg.VIPFile, "30.0.0.0/24")
	require.Eventually(t, func() bool { return sprint(lastState(dp).VIPs) == "[30.0.0.0/24]" }, wait, tick)

	st := debugState(t, cfg.DebugSocket)
	require.Equal(t, "[30.0.0.0/24]", sprint(st.Proxy.WantedVIPs))

	// The end of the context stops it in order: the LB connection is
	// left established for the next run, the sockets are gone.
	cancel()
	require.NoError(t, <-done)
	require.Len(t, l.Open(), 1)
	require.NoFileExists(t, cfg.HealthSocket)
	_, err = os.Stat(cfg.DebugSocket)
	require.True(t, errors.Is(err, os.ErrNotExist), "debug socket: %v", err)
}

// TestStartFailsWithoutIPAM: with the IPAM unreachable the proxy cannot get
// its bridge addresses; Start gives up when its context ends and leaves
// nothing running (goleak checks the goroutines, the sockets are gone).
func TestStartFailsWithoutIPAM(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, time.Second)
	cfg.IPAMService = "127.0.0.1:1"
	cfg.GRPCMaxBackoff = 100 * time.Millisecond
	dp := newFakeDataplane()
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
	defer cancel()
	d, err := proxyd.Start(ctx, cfg, quietLogger(), proxyd.WithDataplane(dp), proxyd.WithoutSDKLogger())
	require.Error(t, err)
	require.ErrorContains(t, err, "proxy")
	require.Nil(t, d)
	require.NoFileExists(t, cfg.HealthSocket)
	require.Equal(t, healthpb.HealthCheckResponse_UNKNOWN, healthStatus(t, cfg.HealthSocket, health.Readiness))
	require.True(t, dp.Closed(), "the dataplane is closed")
}

// TestVIPFileMissingAtStart: a proxy whose NSM_VIP_FILE does not exist yet
// starts, says so once and keeps watching; no VIPs are known, so the
// kernel state found at start stays held. The file's VIPs reach the
// dataplane when it appears, and the hold ends; a deletion keeps them; a recreated file's
// VIPs replace them.
func TestVIPFileMissingAtStart(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, time.Second)
	cfg.NSPService = "127.0.0.1:1" // not used with a VIP file
	cfg.VIPFile = filepath.Join(e.dir, "vips.yaml")
	cfg.LeftoverHold = 0
	var log testutil.JSONLog
	dp := newFakeDataplane()
	e.kernel.set(dp)
	sctx, cancel := context.WithTimeout(e.ctx, wait)
	defer cancel()
	d, err := proxyd.Start(sctx, cfg, slog.New(slog.NewJSONHandler(&log, nil)), proxyd.WithDataplane(dp), proxyd.WithoutSDKLogger())
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Stop()) }()

	const missing = "VIP file does not exist; it will be used when it appears, no VIPs are known until then"
	_, i := log.Wait(wait, nil, 0, missing, "path", cfg.VIPFile)
	require.GreaterOrEqual(t, i, 0, log.String())
	require.Equal(t, 1, log.Count(missing))
	require.Zero(t, log.Count("VIP source stopped"), log.String())
	require.Zero(t, dp.Releases(), "no VIPs known: the leftovers stay held")

	writeVIPs(t, cfg.VIPFile, "20.0.0.1/32")
	require.Eventually(t, func() bool { return sprint(lastState(dp).VIPs) == "[20.0.0.1/32]" }, wait, tick, "last state %+v", lastState(dp))
	require.Eventually(t, func() bool { return dp.Releases() == 1 && lastState(dp).ReleaseLeftovers }, wait, tick,
		"VIPs known, the endpoint registered: the hold ends, in the desired state")

	require.NoError(t, os.Remove(cfg.VIPFile))
	_, i = log.Wait(wait, nil, i, "VIP file removed; keeping the last good VIPs until it is back")
	require.GreaterOrEqual(t, i, 0, log.String())
	require.Equal(t, "[20.0.0.1/32]", sprint(lastState(dp).VIPs))

	writeVIPs(t, cfg.VIPFile, "30.0.0.0/24")
	require.Eventually(t, func() bool { return sprint(lastState(dp).VIPs) == "[30.0.0.0/24]" }, wait, tick, "last state %+v", lastState(dp))
}

// TestIPAMUnreachableIsLogged: with NSM_IPAM_SERVICE pointing where nothing
// listens, the proxy waits for its bridge addresses; while it waits, one
// warning names the IPAM address and the reason (not one per gRPC retry),
// and IPAMCli, part of Readiness, is not serving.
func TestIPAMUnreachableIsLogged(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, time.Second)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg.IPAMService = lis.Addr().String()
	require.NoError(t, lis.Close()) // a closed port
	cfg.GRPCMaxBackoff = 50 * time.Millisecond
	var log testutil.JSONLog
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	started := make(chan error, 1)
	go func() {
		d, err := proxyd.Start(ctx, cfg, slog.New(slog.NewJSONHandler(&log, nil)),
			proxyd.WithDataplane(newFakeDataplane()), proxyd.WithoutSDKLogger())
		if d != nil {
			err = errors.Join(errors.New("started without the IPAM"), d.Stop())
		}
		started <- err
	}()

	line, _ := log.Wait(wait, nil, 0, health.LogConnFailing, "subservice", health.IPAMCli, "target", cfg.IPAMService)
	require.NotNil(t, line, log.String())
	require.Equal(t, "WARN", line["level"])
	require.Contains(t, line["error"], "connection refused")
	require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, healthStatus(t, cfg.HealthSocket, health.IPAMCli))
	time.Sleep(time.Second) // many retries at 50 ms
	require.Equal(t, 1, log.Count(health.LogConnFailing), log.String())
	select {
	case err := <-started:
		t.Fatalf("Start returned while the IPAM is unreachable: %v", err)
	default:
	}
	cancel()
	require.ErrorContains(t, <-started, "allocate bridge addresses")
}
