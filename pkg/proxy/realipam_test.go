package proxy

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
)

// The tests in this file run the proxy against the real IPAM engine
// (pkg/ipam, memory store) served over an in-memory gRPC connection.

type realEnv struct {
	engine *ipam.Engine
	hook   *callHook
	dp     fakeDataplane
	clk    *fakeClock
	p      *Proxy
}

func realEngine(t testing.TB, st store.Store) *ipam.Engine {
	t.Helper()
	return engineOn(t, st, ipam.FamilyConfig{Pool: netip.MustParsePrefix("172.16.0.0/16"), ConduitLength: 20, NodeLength: 24})
}

// engineOn is an IPAM engine of trench-a on st, with the IPv4 pool v4 and
// fd00::/48 (/56, /64), closed at the end of the test.
func engineOn(t testing.TB, st store.Store, v4 ipam.FamilyConfig) *ipam.Engine {
	t.Helper()
	e, err := ipam.New(context.Background(), st, ipam.Config{
		Trench: "trench-a",
		IPv4:   &v4,
		IPv6:   &ipam.FamilyConfig{Pool: netip.MustParsePrefix("fd00::/48"), ConduitLength: 56, NodeLength: 64},
		Logger: testLogger(),
	})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e
}

func newRealEnv(t *testing.T) *realEnv {
	t.Helper()
	e := &realEnv{engine: realEngine(t, memory.New()), hook: &callHook{}, dp: newFakeDataplane(), clk: &fakeClock{}}
	client := serveIPAM(t, ipam.NewServer(e.engine), e.hook.option())
	p, err := New(context.Background(), Config{
		Conduit: "conduit-a", Trench: "trench-a", Node: "worker-1",
		IPAM: client, Dataplane: e.dp, RetryInterval: time.Millisecond, Logger: testLogger(), Clock: e.clk,
	})
	require.NoError(t, err)
	e.p = p
	t.Cleanup(func() { require.NoError(t, p.Close(context.Background())) })
	return e
}

// probe allocates a throw-away child of the proxy's node subnet: it gets
// the lowest free address, which shows what was released.
func (e *realEnv) probe(t *testing.T, f ipam.Family, name string) netip.Prefix {
	t.Helper()
	pfx, err := e.engine.Allocate(context.Background(),
		ipam.Subnet{Trench: "trench-a", Conduit: "conduit-a", Node: "worker-1", Family: f}, name)
	require.NoError(t, err)
	return pfx
}

func TestRealIPAMSetIPContext(t *testing.T) {
	e := newRealEnv(t)
	e.dp.waitState(t, func(s dataplaneState) bool { return sprint(s.BridgeAddrs) == "[172.16.0.1/24 fd00::1/64]" })

	lb := lbConn("proxy-a-lb-1")
	require.NoError(t, e.p.SetIPContext(context.Background(), lb, LBConn))
	require.Equal(t, []string{"172.16.0.3/24", "fd00::3/64"}, ipcOf(lb).GetSrcIpAddrs())
	require.Equal(t, []string{"172.16.0.2/24", "fd00::2/64"}, ipcOf(lb).GetDstIpAddrs())

	tgt := targetConn("target-1")
	require.NoError(t, e.p.SetIPContext(context.Background(), tgt, TargetConn))
	require.Equal(t, []string{"172.16.0.4/24", "fd00::4/64"}, ipcOf(tgt).GetSrcIpAddrs())
	require.Equal(t, []string{"172.16.0.5/24", "fd00::5/64"}, ipcOf(tgt).GetDstIpAddrs())
	require.Equal(t, []string{"172.16.0.1/24", "fd00::1/64"}, ipcOf(tgt).GetExtraPrefixes())

	// A refresh of a still valid context, with VIPs and policies, changes
	// nothing.
	ipc := ipcOf(tgt)
	ipc.SrcIpAddrs = append([]string{"20.0.0.1/32"}, ipc.SrcIpAddrs...)
	ipc.Policies = []*networkservice.PolicyRoute{
		{From: "20.0.0.1/32", Routes: []*networkservice.Route{{Prefix: "0.0.0.0/0", NextHop: "172.16.0.1"}}},
	}
	want := proto.Clone(tgt)
	require.NoError(t, e.p.SetIPContext(context.Background(), tgt, TargetConn))
	require.True(t, proto.Equal(want, tgt))

	// The conduit is deleted and re-created; another conduit took its old
	// slot, so the proxy's node subnet moves. The refresh rewrites the
	// target's context and the bridge follows.
	e.engine.RemoveConduit("conduit-a")
	_, err := e.engine.Allocate(context.Background(),
		ipam.Subnet{Trench: "trench-a", Conduit: "squatter", Node: "x", Family: ipam.IPv4}, "c")
	require.NoError(t, err)
	_, err = e.engine.Allocate(context.Background(),
		ipam.Subnet{Trench: "trench-a", Conduit: "squatter", Node: "x", Family: ipam.IPv6}, "c")
	require.NoError(t, err)
	require.NoError(t, e.p.SetIPContext(context.Background(), tgt, TargetConn))
	require.Equal(t, []string{"20.0.0.1/32", "172.16.16.1/24", "fd00:0:0:100::1/64"}, ipc.GetSrcIpAddrs())
	require.Equal(t, []string{"172.16.16.2/24", "fd00:0:0:100::2/64"}, ipc.GetDstIpAddrs())
	require.Equal(t, []string{"172.16.16.3/24", "fd00:0:0:100::3/64"}, ipc.GetExtraPrefixes())
	require.Equal(t, "172.16.16.3", ipc.GetPolicies()[0].GetRoutes()[0].GetNextHop())
	e.dp.waitState(t, func(s dataplaneState) bool {
		return sprint(s.BridgeAddrs) == "[172.16.16.3/24 fd00:0:0:100::3/64]"
	})
}

func TestRealIPAMReleaseAndReconnect(t *testing.T) {
	e := newRealEnv(t)
	a := lbConn("a")
	require.NoError(t, e.p.SetIPContext(context.Background(), a, LBConn))
	b := targetConn("b")
	require.NoError(t, e.p.SetIPContext(context.Background(), b, TargetConn))

	// b reconnects within the delay: same addresses, nothing released.
	require.NoError(t, e.p.UnsetIPContext(context.Background(), b, TargetConn))
	require.NoError(t, e.p.SetIPContext(context.Background(), b, TargetConn))
	require.Equal(t, []string{"172.16.0.4/24", "fd00::4/64"}, ipcOf(b).GetSrcIpAddrs())

	// a is closed for good: after the delay its addresses are free again.
	require.NoError(t, e.p.UnsetIPContext(context.Background(), a, LBConn))
	require.Eventually(t, func() bool { return e.clk.Active() == 2 }, waitFor, tick)
	e.clk.Advance(DefaultReleaseDelay)
	require.Eventually(t, func() bool { return e.p.Stats().PendingReleases == 0 }, waitFor, tick)
	require.Equal(t, "172.16.0.2/24", e.probe(t, ipam.IPv4, "probe-1").String())
	require.Equal(t, "172.16.0.3/24", e.probe(t, ipam.IPv4, "probe-2").String())
	require.Equal(t, "172.16.0.6/24", e.probe(t, ipam.IPv4, "probe-3").String(), "b's addresses are kept")
}

func TestRealIPAMRollback(t *testing.T) {
	e := newRealEnv(t)
	e.hook.set(failOn(ipamv1.IPFamily_IPV6, "x-dst"))
	require.ErrorContains(t, e.p.SetIPContext(context.Background(), lbConn("x"), LBConn), "injected IPAM failure")
	require.Eventually(t, func() bool { return e.p.Stats().PendingReleases == 0 && e.p.Stats().Rollbacks == 1 },
		waitFor, tick)
	// Everything the failed request took is free again.
	require.Equal(t, "172.16.0.2/24", e.probe(t, ipam.IPv4, "probe-1").String())
	require.Equal(t, "fd00::2/64", e.probe(t, ipam.IPv6, "probe-2").String())
}

func TestRealIPAMForcedReleaseOnClose(t *testing.T) {
	engine := realEngine(t, memory.New())
	client := serveIPAM(t, ipam.NewServer(engine))
	p, err := New(context.Background(), Config{
		Conduit: "conduit-a", Trench: "trench-a", Node: "worker-1", IPAM: client, Dataplane: newFakeDataplane(),
		RetryInterval: time.Millisecond, Logger: testLogger(),
	})
	require.NoError(t, err)
	for _, id := range []string{"a", "b", "c"} {
		require.NoError(t, p.SetIPContext(context.Background(), lbConn(id), LBConn))
		require.NoError(t, p.UnsetIPContext(context.Background(), lbConn(id), LBConn))
	}
	require.NoError(t, p.Close(context.Background()))
	pfx, err := engine.Allocate(context.Background(),
		ipam.Subnet{Trench: "trench-a", Conduit: "conduit-a", Node: "worker-1", Family: ipam.IPv4}, "probe")
	require.NoError(t, err)
	require.Equal(t, "172.16.0.2/24", pfx.String())
}

// A release that a new request of the same connection cancels can reach the
// IPAM's engine after that request's Allocate: its handler was late to start
// (a busy IPAM), and gRPC runs the two calls' handlers side by side. It must
// then release nothing: the connection holds the address the Allocate
// confirmed, and the IPAM would hand it out a second time.
func TestRealIPAMCancelledReleaseOvertakenByTheReRequest(t *testing.T) {
	engine := realEngine(t, memory.New())
	var armed atomic.Bool
	late, entered, done := overtaken("Release", "Allocate", func(c *ipamv1.Child) bool {
		return armed.Load() && c.GetName() == "lb-1-src" && c.GetSubnet().GetIpFamily() == ipamv1.IPFamily_IPV4
	})
	clk := &fakeClock{}
	p, err := New(context.Background(), Config{
		Conduit: "conduit-a", Trench: "trench-a", Node: "worker-1", IPAM: serveIPAM(t, ipam.NewServer(engine), late),
		Dataplane: newFakeDataplane(), RetryInterval: time.Millisecond, Logger: testLogger(), Clock: clk,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close(context.Background())) })

	conn := lbConn("lb-1")
	require.NoError(t, p.SetIPContext(context.Background(), conn, LBConn))
	held := ipcOf(conn).GetDstIpAddrs()[0] // the LB's side: lb-1-src
	require.NoError(t, p.UnsetIPContext(context.Background(), conn, LBConn))
	require.Eventually(t, func() bool { return clk.Active() == 2 }, waitFor, tick)
	armed.Store(true)
	clk.Advance(DefaultReleaseDelay)
	<-entered

	require.NoError(t, p.SetIPContext(context.Background(), conn, LBConn), "the reconnect cancels the release")
	require.Equal(t, held, ipcOf(conn).GetDstIpAddrs()[0])
	<-done
	pfx, err := engine.Allocate(context.Background(),
		ipam.Subnet{Trench: "trench-a", Conduit: "conduit-a", Node: "worker-1", Family: ipam.IPv4}, "probe")
	require.NoError(t, err)
	require.NotEqual(t, held, pfx.String(), "the connection's address is not handed out again")
}

// The mirror case: an Allocate of a request that gave up (its context
// ended while the call was in flight) can reach the IPAM's engine after
// the rollback's Release of the same child. It must then create nothing,
// or the address would be held by nobody until the lease collection.
func TestRealIPAMCancelledAllocateOvertakenByTheRollback(t *testing.T) {
	engine := realEngine(t, memory.New())
	late, entered, done := overtaken("Allocate", "Release", func(c *ipamv1.Child) bool {
		return c.GetName() == "x-src" && c.GetSubnet().GetIpFamily() == ipamv1.IPFamily_IPV4
	})
	p, err := New(context.Background(), Config{
		Conduit: "conduit-a", Trench: "trench-a", Node: "worker-1", IPAM: serveIPAM(t, ipam.NewServer(engine), late),
		Dataplane: newFakeDataplane(), RetryInterval: time.Millisecond, Logger: testLogger(), Clock: &fakeClock{},
		Families: []ipamv1.IPFamily{ipamv1.IPFamily_IPV4},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close(context.Background())) })

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-entered
		cancel() // the NSM request ends while its Allocate is in flight
	}()
	require.Error(t, p.SetIPContext(ctx, lbConn("x"), LBConn))
	<-done
	require.Eventually(t, func() bool { return p.Stats().PendingReleases == 0 }, waitFor, tick)
	pfx, err := engine.Allocate(context.Background(),
		ipam.Subnet{Trench: "trench-a", Conduit: "conduit-a", Node: "worker-1", Family: ipam.IPv4}, "probe")
	require.NoError(t, err)
	require.Equal(t, "172.16.0.2/24", pfx.String(), "the address the abandoned request asked for is free")
}

// overtaken is an interceptor that holds the first call of method late for
// a child that ours matches until a call of method first for it has
// completed: the late call's handler runs after the one that overtook it.
// entered closes when the late call is held, done when it has run.
func overtaken(late, first string, ours func(*ipamv1.Child) bool) (grpc.ServerOption, <-chan struct{}, <-chan struct{}) {
	entered, proceed, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var holdOnce, proceedOnce sync.Once
	return grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo,
		handler grpc.UnaryHandler) (any, error) {
		c, _ := req.(*ipamv1.Child)
		match := ours(c)
		switch method := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]; {
		case match && method == late:
			held := false
			holdOnce.Do(func() { held = true })
			if !held {
				break
			}
			defer close(done)
			close(entered)
			<-proceed // late: the caller gives up meanwhile
			return handler(ctx, req)
		case match && method == first:
			resp, err := handler(ctx, req)
			proceedOnce.Do(func() { close(proceed) })
			return resp, err
		}
		return handler(ctx, req)
	}), entered, done
}
