package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/testutil"
)

// After New, the fake IPAM has given the bridge 172.16.0.1/24 and
// fd00::1/64; a connection's -src and -dst children then get .2 and
// .3 (::2 and ::3) of the same node subnets.

func TestSetIPContextLB(t *testing.T) {
	e := newTestEnv(t)
	conn := lbConn("proxy-a-lb-1")
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, LBConn))

	ipc := ipcOf(conn)
	// The LB side gets the -src addresses, the proxy side the -dst ones.
	require.Equal(t, []string{"172.16.0.3/24", "fd00::3/64"}, ipc.GetSrcIpAddrs())
	require.Equal(t, []string{"172.16.0.2/24", "fd00::2/64"}, ipc.GetDstIpAddrs())
	require.Empty(t, ipc.GetExtraPrefixes())
	// Families are allocated in parallel, -src before -dst in each.
	var v4, v6 []string
	for _, c := range e.ipam.callLog() {
		if strings.Contains(c, "IPV4") {
			v4 = append(v4, c)
		} else {
			v6 = append(v6, c)
		}
	}
	require.Equal(t, []string{"Allocate IPV4/bridge", "Allocate IPV4/proxy-a-lb-1-src", "Allocate IPV4/proxy-a-lb-1-dst"}, v4)
	require.Equal(t, []string{"Allocate IPV6/bridge", "Allocate IPV6/proxy-a-lb-1-src", "Allocate IPV6/proxy-a-lb-1-dst"}, v6)

	// A refresh renews the same children and gives the same addresses, even
	// if the request carries something else (LB addresses are overwritten).
	ipc.SrcIpAddrs = []string{"10.9.9.9/24"}
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, LBConn))
	require.Equal(t, []string{"172.16.0.3/24", "fd00::3/64"}, ipc.GetSrcIpAddrs())
	require.Equal(t, []string{"172.16.0.2/24", "fd00::2/64"}, ipc.GetDstIpAddrs())
	require.Equal(t, 1, e.p.Stats().Connections)
	require.Equal(t, 2+4, e.p.Stats().Allocations)
}

func TestSetIPContextTargetFirstRequest(t *testing.T) {
	e := newTestEnv(t)
	conn := targetConn("target-1-proxy.conduit-a.trench-a.ns-0")
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))

	ipc := ipcOf(conn)
	require.Equal(t, []string{"172.16.0.2/24", "fd00::2/64"}, ipc.GetSrcIpAddrs())
	require.Equal(t, []string{"172.16.0.3/24", "fd00::3/64"}, ipc.GetDstIpAddrs())
	require.Equal(t, []string{"172.16.0.1/24", "fd00::1/64"}, ipc.GetExtraPrefixes())
	// Keyed by the target's path segment id, not by the connection id.
	require.Contains(t, e.ipam.children(), "IPV4/target-1-proxy.conduit-a.trench-a.ns-0-src")
	require.NotContains(t, sprint(e.ipam.children()), "nse-side")
}

func TestSetIPContextTargetUpdateStillValid(t *testing.T) {
	e := newTestEnv(t)
	conn := targetConn("t1")
	conn.Context = &networkservice.ConnectionContext{IpContext: &networkservice.IPContext{
		SrcIpAddrs:    []string{"20.0.0.1/32", "172.16.0.2/24", "2000::1/128", "fd00::2/64"},
		DstIpAddrs:    []string{"172.16.0.3/24", "fd00::3/64"},
		ExtraPrefixes: []string{"172.16.0.1/24", "fd00::1/64"},
		Policies: []*networkservice.PolicyRoute{
			{From: "20.0.0.1/32", Routes: []*networkservice.Route{{Prefix: "0.0.0.0/0", NextHop: "172.16.0.1"}}},
			{From: "2000::1/128", Routes: []*networkservice.Route{{Prefix: "::/0", NextHop: "fd00::1"}}},
		},
	}}
	want := proto.Clone(conn).(*networkservice.Connection)
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))
	require.True(t, proto.Equal(want, conn), "a valid context must be left as it is:\nwant %v\ngot  %v", want, conn)
}

func TestSetIPContextTargetUpdateNewIPs(t *testing.T) {
	e := newTestEnv(t)
	// The target comes back with addresses, gateways and policies from an
	// old node subnet (the conduit was re-created).
	conn := targetConn("t1")
	conn.Context = &networkservice.ConnectionContext{IpContext: &networkservice.IPContext{
		SrcIpAddrs:    []string{"20.0.0.1/32", "172.16.9.2/24", "2000::1/128", "fd00:0:0:9::2/64"},
		DstIpAddrs:    []string{"172.16.9.3/24", "fd00:0:0:9::3/64"},
		ExtraPrefixes: []string{"172.16.9.1/24", "fd00:0:0:9::1/64"},
		Policies: []*networkservice.PolicyRoute{
			{From: "20.0.0.1/32", Routes: []*networkservice.Route{{Prefix: "0.0.0.0/0", NextHop: "172.16.9.1"}}},
			{From: "2000::1/128", Routes: []*networkservice.Route{{Prefix: "::/0", NextHop: "fd00:0:0:9::1"}}},
			// Not via a proxy gateway: left alone.
			{From: "20.0.0.1/32", Routes: []*networkservice.Route{{Prefix: "5.5.5.0/24", NextHop: "192.0.2.1"}}},
		},
	}}
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))
	ipc := ipcOf(conn)
	require.Equal(t, []string{"20.0.0.1/32", "2000::1/128", "172.16.0.2/24", "fd00::2/64"}, ipc.GetSrcIpAddrs())
	require.Equal(t, []string{"172.16.0.3/24", "fd00::3/64"}, ipc.GetDstIpAddrs())
	require.Equal(t, []string{"172.16.0.1/24", "fd00::1/64"}, ipc.GetExtraPrefixes())
	require.Equal(t, "172.16.0.1", ipc.GetPolicies()[0].GetRoutes()[0].GetNextHop())
	require.Equal(t, "fd00::1", ipc.GetPolicies()[1].GetRoutes()[0].GetNextHop())
	require.Equal(t, "192.0.2.1", ipc.GetPolicies()[2].GetRoutes()[0].GetNextHop())
}

// A target's request may carry any extra prefixes: only those that look
// like gateways of this conduit (a host address with the length of the
// current gateway of its family) mark addresses and routes as the proxy's
// to rewrite. Anything else leaves the target's own addresses, routes and
// policies alone.
func TestSetIPContextTargetForeignExtraPrefixes(t *testing.T) {
	e := newTestEnv(t)
	conn := targetConn("t1")
	conn.Context = &networkservice.ConnectionContext{IpContext: &networkservice.IPContext{
		SrcIpAddrs:    []string{"20.0.0.1/32", "10.1.2.3/24", "172.16.9.2/24", "2000::1/128"},
		ExtraPrefixes: []string{"0.0.0.0/0", "10.0.0.1/8", "172.16.7.0/24", "::/0", "not-a-prefix", "172.16.9.1/24"},
		SrcRoutes:     []*networkservice.Route{{Prefix: "5.5.5.0/24", NextHop: "10.0.0.1"}},
		Policies: []*networkservice.PolicyRoute{
			{From: "20.0.0.1/32", Routes: []*networkservice.Route{{Prefix: "0.0.0.0/0", NextHop: "10.0.0.1"}}},
			{From: "2000::1/128", Routes: []*networkservice.Route{{Prefix: "::/0", NextHop: "2001:db8::1"}}},
		},
	}}
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))
	ipc := ipcOf(conn)
	require.Equal(t, []string{"20.0.0.1/32", "10.1.2.3/24", "2000::1/128", "172.16.0.2/24", "fd00::2/64"}, ipc.GetSrcIpAddrs(),
		"only the address inside the one gateway-like entry (172.16.9.1/24) is dropped")
	require.Equal(t, []string{"172.16.0.1/24", "fd00::1/64"}, ipc.GetExtraPrefixes())
	require.Equal(t, "10.0.0.1", ipc.GetSrcRoutes()[0].GetNextHop())
	require.Equal(t, "10.0.0.1", ipc.GetPolicies()[0].GetRoutes()[0].GetNextHop())
	require.Equal(t, "2001:db8::1", ipc.GetPolicies()[1].GetRoutes()[0].GetNextHop())
}

func TestSetIPContextFollowsNodeSubnetChange(t *testing.T) {
	e := newTestEnv(t)
	conn := targetConn("t1")
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))
	ipc := ipcOf(conn)
	ipc.SrcIpAddrs = append([]string{"20.0.0.1/32"}, ipc.SrcIpAddrs...)
	ipc.Policies = []*networkservice.PolicyRoute{
		{From: "20.0.0.1/32", Routes: []*networkservice.Route{{Prefix: "0.0.0.0/0", NextHop: "172.16.0.1"}}},
	}

	// The trench is re-created: the IPAM forgets the node subnets and hands
	// out new ones. The refresh notices, renews the bridge and rewrites.
	e.ipam.dropNodes()
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))
	// The new subnets are 172.16.1.0/24 and fd00:0:0:1::/64; the
	// connection's children come first, the bridge's renewal after.
	require.Equal(t, []string{"20.0.0.1/32", "172.16.1.1/24", "fd00:0:0:1::1/64"}, ipc.GetSrcIpAddrs())
	require.Equal(t, []string{"172.16.1.2/24", "fd00:0:0:1::2/64"}, ipc.GetDstIpAddrs())
	require.Equal(t, []string{"172.16.1.3/24", "fd00:0:0:1::3/64"}, ipc.GetExtraPrefixes())
	require.Equal(t, "172.16.1.3", ipc.GetPolicies()[0].GetRoutes()[0].GetNextHop())
	e.dp.waitState(t, func(s dataplaneState) bool { return sprint(s.BridgeAddrs) == "[172.16.1.3/24 fd00:0:0:1::3/64]" })
	require.Equal(t, uint64(2), e.p.Stats().BridgeAddrChanges)
}

func TestSetIPContextBadConnections(t *testing.T) {
	e := newTestEnv(t)
	require.Error(t, e.p.SetIPContext(context.Background(), nil, LBConn))
	require.Error(t, e.p.SetIPContext(context.Background(), &networkservice.Connection{}, LBConn))
	require.Error(t, e.p.SetIPContext(context.Background(), &networkservice.Connection{Id: "x"}, TargetConn))
	require.Error(t, e.p.SetIPContext(context.Background(), lbConn("x"), ConnType(7)))
	require.Error(t, e.p.UnsetIPContext(context.Background(), &networkservice.Connection{Id: "x"}, TargetConn))
}

var errInjected = errors.New("injected IPAM failure")

// failOn makes the fake fail Allocate of the given child name and family.
func failOn(f ipamv1.IPFamily, name string) func(context.Context, string, *ipamv1.Child) error {
	return func(_ context.Context, m string, c *ipamv1.Child) error {
		if m == "Allocate" && c.GetName() == name && c.GetSubnet().GetIpFamily() == f {
			return errInjected
		}
		return nil
	}
}

func TestSetIPContextRollsBackNewAllocations(t *testing.T) {
	e := newTestEnv(t)
	e.ipam.setHook(failOn(ipamv1.IPFamily_IPV6, "lb-1-dst"))
	conn := lbConn("lb-1")
	err := e.p.SetIPContext(context.Background(), conn, LBConn)
	require.ErrorContains(t, err, "injected IPAM failure")
	require.Nil(t, conn.GetContext().GetIpContext().GetSrcIpAddrs(), "a failed request must not fill the context")

	// The three children allocated before the failure are released (and the
	// failed one, in case the IPAM committed it).
	require.Eventually(t, func() bool {
		return sprint(e.ipam.children()) == "[IPV4/bridge IPV6/bridge]" &&
			e.ipam.countCalls("Release IPV6/lb-1-dst") == 1
	}, waitFor, tick)
	require.Eventually(t, func() bool { return e.p.Stats().Rollbacks == 1 && e.p.Stats().PendingReleases == 0 }, waitFor, tick)
	require.Equal(t, 0, e.p.Stats().Connections)
	require.Equal(t, 2, e.p.Stats().Allocations)

	// Once the IPAM recovers, the connection gets its addresses.
	e.ipam.setHook(nil)
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, LBConn))
	require.Len(t, ipcOf(conn).GetSrcIpAddrs(), 2)
}

func TestSetIPContextKeepsExistingAllocationsOnFailure(t *testing.T) {
	e := newTestEnv(t)
	conn := lbConn("lb-1")
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, LBConn))
	before := proto.Clone(conn)

	// A refresh fails half-way: nothing is released, the context is kept.
	e.ipam.setHook(failOn(ipamv1.IPFamily_IPV6, "lb-1-dst"))
	require.Error(t, e.p.SetIPContext(context.Background(), conn, LBConn))
	require.True(t, proto.Equal(before, conn))
	require.Len(t, e.ipam.children(), 6)
	require.Equal(t, uint64(0), e.p.Stats().Rollbacks)

	// The same after a proxy restart: the proxy does not know the id, but
	// the connection carries addresses, so they are in use.
	e2 := newTestEnv(t, func(c *Config) { c.IPAM = serveIPAM(t, e.ipam) })
	require.Error(t, e2.p.SetIPContext(context.Background(), conn, LBConn))
	require.True(t, proto.Equal(before, conn))
	require.Equal(t, uint64(0), e2.p.Stats().Rollbacks)
	for _, c := range e.ipam.callLog() {
		require.NotContains(t, c, "Release")
	}
}

// TestSetIPContextParallelIDs: a request stuck in the IPAM for one id does
// not hold up another id.
func TestSetIPContextParallelIDs(t *testing.T) {
	e := newTestEnv(t)
	entered := make(chan struct{})
	unblock := make(chan struct{})
	var once sync.Once
	e.ipam.setHook(func(ctx context.Context, m string, c *ipamv1.Child) error {
		if c.GetName() == "slow-src" {
			once.Do(func() { close(entered) })
			select {
			case <-unblock:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	slowDone := make(chan error, 1)
	slow := lbConn("slow")
	go func() { slowDone <- e.p.SetIPContext(context.Background(), slow, LBConn) }()
	<-entered

	// The slow request is inside the IPAM; another id goes through.
	fast := lbConn("fast")
	require.NoError(t, e.p.SetIPContext(context.Background(), fast, LBConn))
	require.Len(t, ipcOf(fast).GetSrcIpAddrs(), 2)
	select {
	case err := <-slowDone:
		t.Fatalf("slow request finished before it was unblocked: %v", err)
	default:
	}
	// So does an Unset of the blocked id: it never waits for the IPAM.
	require.NoError(t, e.p.UnsetIPContext(context.Background(), lbConn("other"), LBConn))

	close(unblock)
	require.NoError(t, <-slowDone)
	require.Len(t, ipcOf(slow).GetSrcIpAddrs(), 2)
}

// TestSetIPContextSameIDSerialized: two requests for one id do not
// interleave their IPAM calls.
func TestSetIPContextSameIDSerialized(t *testing.T) {
	e := newTestEnv(t)
	entered := make(chan struct{}, 8)
	unblock := make(chan struct{})
	e.ipam.setHook(func(ctx context.Context, m string, c *ipamv1.Child) error {
		if c.GetName() == "x-src" && c.GetSubnet().GetIpFamily() == ipamv1.IPFamily_IPV4 {
			entered <- struct{}{}
			select {
			case <-unblock:
			case <-ctx.Done():
			}
		}
		return nil
	})
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- e.p.SetIPContext(context.Background(), lbConn("x"), LBConn) }()
	}
	<-entered
	// The second request waits for the id lock, not in the IPAM: only one
	// call is in.
	require.Eventually(t, func() bool {
		e.p.locks.mu.Lock()
		defer e.p.locks.mu.Unlock()
		return e.p.locks.m["x"].refs == 2
	}, waitFor, tick)
	require.Len(t, entered, 0)
	close(unblock)
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	require.Equal(t, 2, e.ipam.countCalls("Allocate IPV4/x-src"))
}

func TestSetIPContextCancelledWhileWaitingForID(t *testing.T) {
	e := newTestEnv(t)
	entered := make(chan struct{})
	unblock := make(chan struct{})
	e.ipam.setHook(func(ctx context.Context, m string, c *ipamv1.Child) error {
		if c.GetName() == "x-src" && c.GetSubnet().GetIpFamily() == ipamv1.IPFamily_IPV4 {
			close(entered)
			select {
			case <-unblock:
			case <-ctx.Done():
			}
		}
		return nil
	})
	first := make(chan error, 1)
	go func() { first <- e.p.SetIPContext(context.Background(), lbConn("x"), LBConn) }()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, e.p.SetIPContext(ctx, lbConn("x"), LBConn), context.Canceled)
	close(unblock)
	require.NoError(t, <-first)
}

// The IPAM moved a child the proxy holds (its store was restored from an
// older snapshot, say): the proxy follows the IPAM and says so.
func TestSetIPContextFollowsAMovedChild(t *testing.T) {
	var logs testutil.SyncBuffer
	e := newTestEnv(t, func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	conn := targetConn("t1")
	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))
	require.Equal(t, []string{"172.16.0.2/24", "fd00::2/64"}, ipcOf(conn).GetSrcIpAddrs())

	e.ipam.mu.Lock()
	for _, n := range e.ipam.nodes {
		if n.subnet.Addr().Is4() {
			moved := netip.MustParseAddr("172.16.0.9")
			delete(n.used, n.byName["t1-src"])
			n.byName["t1-src"], n.used[moved] = moved, true
		}
	}
	e.ipam.mu.Unlock()

	require.NoError(t, e.p.SetIPContext(context.Background(), conn, TargetConn))
	require.ElementsMatch(t, []string{"172.16.0.9/24", "fd00::2/64"}, ipcOf(conn).GetSrcIpAddrs(), "the proxy follows the IPAM")
	require.Contains(t, logs.String(), `"msg":"the IPAM answered another address than the one held; following it"`)
	require.Contains(t, logs.String(), `"held":"172.16.0.2/24","answered":"172.16.0.9/24"`)
}
