package proxy

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/testutil"
)

// TestNewRetriesBridgeWithoutDuplicates: a family that fails at startup is
// retried alone; the one that succeeded is neither asked again nor doubled.
func TestNewRetriesBridgeWithoutDuplicates(t *testing.T) {
	ipam := newFakeIPAM()
	var mu sync.Mutex
	fails := 3
	ipam.setHook(func(_ context.Context, m string, c *ipamv1.Child) error {
		mu.Lock()
		defer mu.Unlock()
		if c.GetSubnet().GetIpFamily() == ipamv1.IPFamily_IPV6 && fails > 0 {
			fails--
			return errInjected
		}
		return nil
	})
	dp := newFakeDataplane()
	p, err := New(context.Background(), Config{
		Conduit: "c", Trench: "t", Node: "n", IPAM: serveIPAM(t, ipam), Dataplane: dp,
		RetryInterval: time.Millisecond, Logger: testLogger(), Clock: &fakeClock{},
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close(context.Background())) }()
	require.Equal(t, 1, ipam.countCalls("Allocate IPV4/bridge"))
	require.Equal(t, 4, ipam.countCalls("Allocate IPV6/bridge"))
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("172.16.0.1/24"), netip.MustParsePrefix("fd00::1/64")},
		p.BridgeAddrs())
	require.Equal(t, uint64(3), p.Stats().IPAMErrors)
}

func TestNewGivesUpWhenContextEnds(t *testing.T) {
	ipam := newFakeIPAM()
	tried := make(chan struct{}, 1000)
	ipam.setHook(func(context.Context, string, *ipamv1.Child) error {
		tried <- struct{}{}
		return errInjected
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-tried
		cancel()
	}()
	_, err := New(ctx, Config{
		Conduit: "c", Trench: "t", IPAM: serveIPAM(t, ipam), Dataplane: newFakeDataplane(),
		RetryInterval: time.Millisecond, Logger: testLogger(),
	})
	require.ErrorIs(t, err, context.Canceled)
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := New(context.Background(), Config{})
	require.ErrorContains(t, err, "no IPAM client")
	require.ErrorContains(t, err, "no dataplane")
	_, err = New(context.Background(), Config{Conduit: "c", Trench: "t", IPAM: ipamv1.NewIpamClient(nil),
		Dataplane: newFakeDataplane(), Families: []ipamv1.IPFamily{7}})
	require.ErrorContains(t, err, "unknown IP family")
}

func TestParseIPFamily(t *testing.T) {
	require.Equal(t, []ipamv1.IPFamily{ipamv1.IPFamily_IPV4}, ParseIPFamily("IPv4"))
	require.Equal(t, []ipamv1.IPFamily{ipamv1.IPFamily_IPV6}, ParseIPFamily("ipv6"))
	require.Equal(t, []ipamv1.IPFamily{ipamv1.IPFamily_IPV4, ipamv1.IPFamily_IPV6}, ParseIPFamily("dualstack"))
	require.Equal(t, []ipamv1.IPFamily{ipamv1.IPFamily_IPV4, ipamv1.IPFamily_IPV6}, ParseIPFamily("whatever"))
}

// TestBridgeRenewalFollowsIPAM: the periodic renewal re-allocates the
// bridge child; when the IPAM answers a different address (here: its data
// was lost and another child took the old address), the dataplane, the
// gateways of new targets and the policies of refreshed ones follow.
func TestBridgeRenewalFollowsIPAM(t *testing.T) {
	e := newTestEnv(t, func(c *Config) {
		c.Families = []ipamv1.IPFamily{ipamv1.IPFamily_IPV4}
		c.BridgeRenewInterval = time.Minute
	})
	old := targetConn("old")
	require.NoError(t, e.p.SetIPContext(context.Background(), old, TargetConn))
	require.Equal(t, []string{"172.16.0.1/24"}, ipcOf(old).GetExtraPrefixes())
	ipcOf(old).SrcIpAddrs = append(ipcOf(old).SrcIpAddrs, "20.0.0.1/32")
	ipcOf(old).Policies = []*networkservice.PolicyRoute{
		{From: "20.0.0.1/32", Routes: []*networkservice.Route{{Prefix: "0.0.0.0/0", NextHop: "172.16.0.1"}}},
	}

	// Renewal with the same answer: nothing changes.
	require.Eventually(t, func() bool { return e.clk.Active() == 1 }, waitFor, tick)
	e.clk.Advance(time.Minute)
	require.Eventually(t, func() bool { return e.ipam.countCalls("Allocate IPV4/bridge") == 2 }, waitFor, tick)
	require.Equal(t, uint64(0), e.p.Stats().BridgeAddrChanges)

	// The IPAM loses the bridge child and hands its address to someone
	// else; the next renewal gets a new one in the same subnet.
	e.ipam.mu.Lock()
	n := e.ipam.nodes[nodeKey(e.p.subnets[ipamv1.IPFamily_IPV4])]
	delete(n.byName, "bridge")
	n.byName["squatter"] = netip.MustParseAddr("172.16.0.1")
	e.ipam.mu.Unlock()
	require.Eventually(t, func() bool { return e.clk.Active() == 1 }, waitFor, tick)
	e.clk.Advance(time.Minute)
	e.dp.waitState(t, func(s dataplaneState) bool { return sprint(s.BridgeAddrs) == "[172.16.0.4/24]" })
	require.Equal(t, uint64(1), e.p.Stats().BridgeAddrChanges)

	fresh := targetConn("fresh")
	require.NoError(t, e.p.SetIPContext(context.Background(), fresh, TargetConn))
	require.Equal(t, []string{"172.16.0.4/24"}, ipcOf(fresh).GetExtraPrefixes())

	require.NoError(t, e.p.SetIPContext(context.Background(), old, TargetConn))
	require.Equal(t, []string{"172.16.0.4/24"}, ipcOf(old).GetExtraPrefixes())
	require.Equal(t, "172.16.0.4", ipcOf(old).GetPolicies()[0].GetRoutes()[0].GetNextHop())
	require.Equal(t, []string{"172.16.0.2/24", "20.0.0.1/32"}, ipcOf(old).GetSrcIpAddrs())
}

func TestRenewBridgeReportsFailure(t *testing.T) {
	e := newTestEnv(t)
	e.ipam.setHook(failOn(ipamv1.IPFamily_IPV6, "bridge"))
	err := e.p.RenewBridge(context.Background())
	require.ErrorContains(t, err, "injected IPAM failure")
	require.Len(t, e.p.BridgeAddrs(), 2, "a failed renewal keeps the address")
}

// An IPAM that does not answer is seen while the proxy waits for it: each
// try ends at the IPAM timeout, the first failure is one warning, and the
// allocation that finally succeeds says after how many.
func TestBridgeAllocationReportsASilentIPAM(t *testing.T) {
	ipam := newFakeIPAM()
	var mu sync.Mutex
	hangs := 2
	ipam.setHook(func(ctx context.Context, _ string, _ *ipamv1.Child) error {
		mu.Lock()
		hang := hangs > 0
		hangs--
		mu.Unlock()
		if hang {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	var log testutil.JSONLog
	p, err := New(context.Background(), Config{
		Conduit: "c", Trench: "t", Node: "n", IPAM: serveIPAM(t, ipam), Dataplane: newFakeDataplane(),
		RetryInterval: time.Millisecond, IPAMTimeout: 50 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err, "no answer for a while is no failure")
	defer func() { require.NoError(t, p.Close(context.Background())) }()
	require.Equal(t, 1, log.Count("bridge address allocation failed; retrying until the IPAM answers"), log.String())
	line, _ := log.Find(0, "bridge addresses allocated after failed tries")
	require.NotNil(t, line, log.String())
	// The two hung calls fail; on a busy machine an answered call can miss
	// the 50 ms timeout too, so there may be more tries, each one counted.
	tries, ok := line["failedTries"].(float64)
	require.True(t, ok, "failedTries is a number: %v", line)
	require.GreaterOrEqual(t, tries, 2.0, log.String())
	require.Equal(t, int(tries)-1, log.Count("bridge address allocation failed again"), log.String())
}
