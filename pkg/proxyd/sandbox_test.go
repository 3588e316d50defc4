package proxyd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/edwarnicke/grpcfd"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/tools/sandbox"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/health"
	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
	"github.com/causeway-net/causeway/pkg/nsm/fullmesh"
	"github.com/causeway-net/causeway/pkg/nsm/nsmtest"
	"github.com/causeway-net/causeway/pkg/proxyd"
)

// healthStatus asks the daemon's health socket for a probe's status.
func healthStatus(t *testing.T, socket, probe string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	cc, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer func() { _ = cc.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: probe})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN
	}
	return resp.GetStatus()
}

// debugState is what `proxy -debug` prints for the running daemon.
func debugState(t *testing.T, socket string) proxyd.DebugState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, proxyd.PrintDebug(ctx, socket, &out))
	var st proxyd.DebugState
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("decode the debug state: %v", err)
	}
	return st
}

func addrsOf(ps []netip.Prefix) []netip.Addr {
	out := make([]netip.Addr, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Addr())
	}
	return out
}

// TestDaemonTargetsAndFullMesh runs the assembled daemon in the NSM
// sandbox: a full mesh to three load balancers, a target of its node, the
// VIPs of the configuration server, readiness, -debug, an LB leaving, and
// the shutdown.
func TestDaemonTargetsAndFullMesh(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, 20*time.Second)
	lbs := map[string]*nsmtest.Conns{}
	entries := map[string]*sandbox.EndpointEntry{}
	nses := map[string]*registryapi.NetworkServiceEndpoint{}
	for _, name := range []string{"lb-1", "lb-2", "lb-3"} {
		lbs[name], entries[name], nses[name] = e.addLB(name)
	}
	require.Equal(t, healthpb.HealthCheckResponse_UNKNOWN, healthStatus(t, cfg.HealthSocket, health.Readiness))
	d, dp := e.start(t, cfg)

	// The bridge has one address per family from the node's subnets.
	bridge := d.Proxy().Snapshot().State.BridgeAddrs
	require.Equal(t, "[172.16.0.1/24 fd00::1/64]", sprint(bridge))
	subnets := nodeSubnets(bridge)

	// Full mesh: one connection per LB, with its deterministic id, and
	// each LB got its addresses.
	require.Eventually(t, func() bool { return len(d.LBConnections()) == 3 }, wait, tick)
	conns := d.LBConnections()
	lbAddrs := map[string][]netip.Addr{}
	ports := map[string]int{}
	for name, l := range lbs {
		conn := conns[name]
		require.NotNil(t, conn, name)
		require.Equal(t, proxyName+"-"+lbService+"-"+name, conn.GetId())
		require.Equal(t, fullmesh.ConnectionID(proxyName, lbService, name), conn.GetId())
		require.Equal(t, kernelmech.MECHANISM, conn.GetMechanism().GetType())
		require.Equal(t, uint32(cfg.MTU), conn.GetContext().GetMTU())
		open := l.Open()
		require.Len(t, open, 1, "exactly one connection to %s", name)
		ipc := open[0].GetContext().GetIpContext()
		lbSide := mustPrefixes(t, ipc.GetDstIpAddrs())
		requireOnePerSubnet(t, lbSide, subnets)
		requireOnePerSubnet(t, mustPrefixes(t, ipc.GetSrcIpAddrs()), subnets)
		require.Equal(t, ipc.GetDstIpAddrs(), conn.GetContext().GetIpContext().GetDstIpAddrs())
		lbAddrs[name] = addrsOf(lbSide)
		// The forwarder created the proxy's end of the connection.
		ifname := kernelmech.ToMechanism(conn.GetMechanism()).GetInterfaceName()
		require.Eventually(t, func() bool { _, ok := dp.LinkByName(ifname); return ok }, wait, tick)
		l, _ := dp.LinkByName(ifname)
		ports[name] = l.Index
	}

	// Once the link events arrived, the dataplane routes over the three
	// LBs, each nexthop tied to its port, and has the VIPs.
	wantHops := func(names ...string) []netip.Addr {
		var out []netip.Addr
		for _, n := range names {
			out = append(out, lbAddrs[n]...)
		}
		slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
		return out
	}
	hopsOK := func(s dataplane.State, names ...string) bool {
		if !slices.Equal(s.Nexthops, wantHops(names...)) {
			return false
		}
		for _, n := range names {
			i := slices.IndexFunc(s.Ports, func(p dataplane.Port) bool { return p.Index == ports[n] })
			if i < 0 {
				return false
			}
			for _, a := range lbAddrs[n] {
				if !slices.Contains(s.Ports[i].Nexthops, a) {
					return false
				}
			}
		}
		return true
	}
	require.Eventually(t, func() bool {
		s := lastState(dp)
		return hopsOK(s, "lb-1", "lb-2", "lb-3") && sprint(s.VIPs) == "[20.0.0.1/32 2001:db8::1/128]" &&
			sprint(s.BridgeAddrs) == sprint(bridge)
	}, wait, tick, "last state %+v", lastState(dp))

	// A target of this node gets its addresses and the bridge as gateways.
	nsc := e.targetClient()
	rctx, rcancel := context.WithTimeout(e.ctx, wait)
	defer rcancel()
	target, err := nsc.Request(rctx, targetRequest("target-1", nil))
	require.NoError(t, err)
	require.Equal(t, proxyName, target.GetNetworkServiceEndpointName())
	tipc := target.GetContext().GetIpContext()
	requireOnePerSubnet(t, mustPrefixes(t, tipc.GetSrcIpAddrs()), subnets)
	requireOnePerSubnet(t, mustPrefixes(t, tipc.GetDstIpAddrs()), subnets)
	require.Equal(t, []string{"172.16.0.1/24", "fd00::1/64"}, tipc.GetExtraPrefixes())
	taken := map[netip.Addr]bool{}
	for _, a := range append(append(mustPrefixes(t, tipc.GetSrcIpAddrs()), mustPrefixes(t, tipc.GetDstIpAddrs())...), bridge...) {
		require.False(t, taken[a.Addr()], "address %v handed out twice", a)
		taken[a.Addr()] = true
	}
	for _, as := range lbAddrs {
		for _, a := range as {
			require.False(t, taken[a], "target got an LB's address %v", a)
		}
	}
	// The target's link is a bridge port; it brings no nexthop.
	require.Eventually(t, func() bool { return len(lastState(dp).Ports) == 4 }, wait, tick)
	require.True(t, hopsOK(lastState(dp), "lb-1", "lb-2", "lb-3"))

	// Ready: IPAM and NSP connected, the endpoint answers, an LB is
	// connected.
	require.Eventually(t, func() bool {
		return healthStatus(t, cfg.HealthSocket, health.Readiness) == healthpb.HealthCheckResponse_SERVING
	}, wait, tick)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, healthStatus(t, cfg.HealthSocket, health.Liveness))

	// proxy -debug reads the running daemon's state.
	st := debugState(t, cfg.DebugSocket)
	require.Equal(t, proxyName, st.Config["name"])
	require.IsType(t, "", st.Config["requestTimeout"], "durations as text, as in the starting line")
	require.Equal(t, node, st.Proxy.Node)
	require.Len(t, st.Proxy.Interfaces, 4)
	require.NotNil(t, st.Dataplane.Desired)
	require.Equal(t, sprint(lastState(dp).Nexthops), sprint(st.Dataplane.Desired.Nexthops))
	var ids []string
	for _, c := range st.Proxy.Connections {
		ids = append(ids, c.ID)
	}
	for name := range lbs {
		require.Contains(t, ids, fullmesh.ConnectionID(proxyName, lbService, name))
	}

	// lb-2 leaves: its connection is closed, its link goes and its
	// nexthops leave the route.
	_, err = entries["lb-2"].Unregister(e.ctx, nses["lb-2"])
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := d.LBConnections()["lb-2"]; return !ok }, wait, tick)
	require.Eventually(t, func() bool { return len(lbs["lb-2"].Open()) == 0 }, wait, tick)
	require.Eventually(t, func() bool {
		s := lastState(dp)
		return hopsOK(s, "lb-1", "lb-3") && !slices.ContainsFunc(s.Ports, func(p dataplane.Port) bool { return p.Index == ports["lb-2"] }) && len(s.Ports) == 3
	}, wait, tick, "last state %+v", lastState(dp))
	require.Len(t, lbs["lb-1"].Open(), 1)
	require.Len(t, lbs["lb-3"].Open(), 1)

	// A refresh of the target changes nothing.
	refreshed, err := nsc.Request(rctx, targetRequest("", target))
	require.NoError(t, err)
	require.Equal(t, tipc.GetSrcIpAddrs(), refreshed.GetContext().GetIpContext().GetSrcIpAddrs())
	require.Equal(t, tipc.GetDstIpAddrs(), refreshed.GetContext().GetIpContext().GetDstIpAddrs())

	// Stop closes the sockets and leaves the LB connections established,
	// for a run restarted in the namespace to resume.
	require.NoError(t, d.Stop())
	require.Len(t, lbs["lb-1"].Open(), 1)
	require.Len(t, lbs["lb-3"].Open(), 1)
	require.Equal(t, healthpb.HealthCheckResponse_UNKNOWN, healthStatus(t, cfg.HealthSocket, health.Readiness))
	_, err = nsc.Close(rctx, refreshed)
	_ = err // the proxy is gone: the close reaches no endpoint
}

// TestDaemonTargetAddressLifecycle follows a target's addresses through
// the daemon and the real IPAM: kept by a refresh and by a reconnect
// within the release delay, released after it, and kept across a proxy
// restart.
func TestDaemonTargetAddressLifecycle(t *testing.T) {
	e := newEnv(t)
	const delay = 3 * time.Second
	cfg := e.config(t, delay)
	d1, dp1 := e.start(t, cfg)
	nsc := e.targetClient()
	rctx, rcancel := context.WithTimeout(e.ctx, 2*wait)
	defer rcancel()

	conn, err := nsc.Request(rctx, targetRequest("target-1", nil))
	require.NoError(t, err)
	ipc := conn.GetContext().GetIpContext()
	src, dst := ipc.GetSrcIpAddrs(), ipc.GetDstIpAddrs()
	subnets := nodeSubnets(d1.Proxy().Snapshot().State.BridgeAddrs)
	requireOnePerSubnet(t, mustPrefixes(t, src), subnets)
	requireOnePerSubnet(t, mustPrefixes(t, dst), subnets)
	require.Equal(t, []string{"172.16.0.1/24", "fd00::1/64"}, ipc.GetExtraPrefixes())
	require.Eventually(t, func() bool { return len(lastState(dp1).Ports) == 1 }, wait, tick)

	// A refresh keeps them.
	conn, err = nsc.Request(rctx, targetRequest("", conn))
	require.NoError(t, err)
	require.Equal(t, src, conn.GetContext().GetIpContext().GetSrcIpAddrs())
	require.Equal(t, dst, conn.GetContext().GetIpContext().GetDstIpAddrs())

	// Closed and reconnected within the delay: the release is cancelled.
	_, err = nsc.Close(rctx, conn)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(lastState(dp1).Ports) == 0 }, wait, tick, "the closed link leaves the bridge")
	conn, err = nsc.Request(rctx, targetRequest("target-1", nil))
	require.NoError(t, err)
	require.Equal(t, src, conn.GetContext().GetIpContext().GetSrcIpAddrs())
	require.Equal(t, dst, conn.GetContext().GetIpContext().GetDstIpAddrs())
	stats := d1.Proxy().Stats()
	require.Equal(t, uint64(1), stats.ReleasesCancelled, "%+v", stats)
	require.Zero(t, stats.Releases)

	// Closed for good: after the delay the IPAM has them free again (the
	// lowest free addresses of the node subnet are exactly the target's).
	_, err = nsc.Close(rctx, conn)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s := d1.Proxy().Stats()
		return s.Releases == 1 && s.PendingReleases == 0
	}, wait, tick)
	for i, f := range []ipam.Family{ipam.IPv4, ipam.IPv6} {
		got := []string{e.ipamProbe(t, f, "probe-a").String(), e.ipamProbe(t, f, "probe-b").String()}
		require.ElementsMatch(t, []string{src[i], dst[i]}, got, "family %v", f)
		for _, n := range []string{"probe-a", "probe-b"} {
			require.NoError(t, e.engine.Release(e.ctx, ipam.Subnet{Trench: trench, Conduit: conduit, Node: node, Family: f}, n))
		}
	}

	// Restart: a target connected to the first daemon keeps its addresses
	// with the second one, on the same IPAM.
	conn2, err := nsc.Request(rctx, targetRequest("target-2", nil))
	require.NoError(t, err)
	src2, dst2 := conn2.GetContext().GetIpContext().GetSrcIpAddrs(), conn2.GetContext().GetIpContext().GetDstIpAddrs()
	require.NoError(t, d1.Stop())
	// The stopped proxy did not release them: the IPAM hands out others.
	v4 := ipam.Subnet{Trench: trench, Conduit: conduit, Node: node, Family: ipam.IPv4}
	probe := e.ipamProbe(t, ipam.IPv4, "probe-c").String()
	require.NotContains(t, []string{src2[0], dst2[0]}, probe)
	require.NoError(t, e.engine.Release(e.ctx, v4, "probe-c"))
	// The second daemon gets its NSM credentials and options injected:
	// the sandbox's own dial options (its test tokens) and a plain server.
	d2, dp2 := e.start(t, cfg,
		proxyd.WithCredentials(credentials.Insecure(quietLogger(), time.Hour)),
		proxyd.WithNSMDialOptions(sandbox.DialOptions()...),
		proxyd.WithNSMServerOptions(grpc.Creds(grpcfd.TransportCredentials(insecure.NewCredentials()))))
	require.Equal(t, "[172.16.0.1/24 fd00::1/64]", sprint(d2.Proxy().Snapshot().State.BridgeAddrs), "same bridge addresses")
	var healed *networkservice.Connection
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(rctx, 5*time.Second)
		defer cancel()
		c, err := nsc.Request(ctx, targetRequest("", conn2))
		if err != nil {
			return false
		}
		healed = c
		return true
	}, wait, tick)
	require.Equal(t, src2, healed.GetContext().GetIpContext().GetSrcIpAddrs())
	require.Equal(t, dst2, healed.GetContext().GetIpContext().GetDstIpAddrs())
	require.Eventually(t, func() bool { return len(lastState(dp2).Ports) == 1 }, wait, tick)
	_, err = nsc.Close(rctx, healed)
	require.NoError(t, err)
}
