package main

import (
	"net/netip"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/testutil"
)

// Deadlines of the convergence checks: generous, for a loaded 2-core machine.
const (
	converge = 60 * time.Second
	poll     = 200 * time.Millisecond
)

// TestProxyKernelE2E runs the real proxy binary in its namespace against
// the lab's NSM control plane (NSMgr and veth forwarder), the real IPAM
// binary, two LB endpoints and a target, and checks the kernel state the
// proxy builds in its namespace: bridge ports, bridge addresses, the ECMP
// default route over the LBs, the VIP rules; then traffic from the target
// to the bridge and from a VIP through the LBs, `proxy -debug`, a change of
// the VIP file, the target's and an LB's departure, and a clean exit on
// SIGTERM.
func TestProxyKernelE2E(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	for _, tc := range []struct {
		ipFamily string
		families []ipamv1.IPFamily
	}{
		{"ipv4", []ipamv1.IPFamily{ipamv1.IPFamily_IPV4}},
		{"dualstack", []ipamv1.IPFamily{ipamv1.IPFamily_IPV4, ipamv1.IPFamily_IPV6}},
	} {
		t.Run(tc.ipFamily, func(t *testing.T) { testProxyKernelE2E(t, tc.ipFamily, tc.families) })
	}
}

// netlinkFamily maps an IPAM family to netlink's.
func netlinkFamily(f ipamv1.IPFamily) int {
	if f == ipamv1.IPFamily_IPV6 {
		return netlink.FAMILY_V6
	}
	return netlink.FAMILY_V4
}

// byFamily returns the addresses of ps of family f.
func byFamily(ps []netip.Prefix, f ipamv1.IPFamily) []netip.Addr {
	var out []netip.Addr
	for _, p := range ps {
		if p.Addr().Is6() == (f == ipamv1.IPFamily_IPV6) {
			out = append(out, p.Addr())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// dump logs the kernel state of some namespaces.
func dump(t *testing.T, nss ...*testutil.NetNS) {
	for _, ns := range nss {
		out, _ := ns.Exec("sh", "-c", "ip -d link; ip addr; ip rule; ip route show table all; ip -6 route show table all")
		t.Logf("---- %s ----\n%s", ns.Name, out)
	}
}

func testProxyKernelE2E(t *testing.T, ipFamily string, families []ipamv1.IPFamily) {
	b := startBed(t, bedConfig{ipFamily: ipFamily, lbs: 2})
	ok := false
	t.Cleanup(func() {
		if !ok {
			dump(t, b.proxyNS, b.lbs[0].ns, b.lbs[1].ns)
		}
	})

	// The bridge carries the IPAM's bridge addresses.
	want := b.bridgeAddrs(families...)
	require.Eventually(t, func() bool {
		have := globalPrefixes(t, b.proxyNS, bridge)
		for _, p := range want {
			if !slices.Contains(have, p) {
				return false
			}
		}
		return true
	}, converge, poll, "bridge %s must carry the IPAM bridge addresses %v", bridge, want)

	// Each LB's veth has its other end on the bridge, and the LBs'
	// addresses are the nexthops of the ECMP default route of table 1.
	lbAddrs := func(ls []*lb) []netip.Prefix {
		var out []netip.Prefix
		for _, l := range ls {
			for _, v := range vethsIn(t, l.ns) {
				out = append(out, globalPrefixes(t, l.ns, v.Attrs().Name)...)
			}
		}
		return out
	}
	lbsJoined := func(ls []*lb) bool {
		ports, _ := bridgePorts(t, b.proxyNS, bridge)
		for _, l := range ls {
			v := vethsIn(t, l.ns)
			if len(v) != 1 || peerIn(v[0], ports) == nil {
				return false
			}
		}
		return true
	}
	nexthopsAre := func(ls []*lb) bool {
		addrs := lbAddrs(ls)
		for _, f := range families {
			wantNH := byFamily(addrs, f)
			if len(wantNH) != len(ls) || !slices.Equal(defaultNexthops(t, b.proxyNS, table, netlinkFamily(f)), wantNH) {
				return false
			}
		}
		return true
	}
	require.Eventually(t, func() bool { return lbsJoined(b.lbs) && nexthopsAre(b.lbs) }, converge, poll,
		"both LB connections must be bridge ports and the ECMP nexthops of table %d", table)
	for _, f := range families {
		nh := defaultNexthops(t, b.proxyNS, table, netlinkFamily(f))
		require.Len(t, nh, 2)
		for _, a := range nh {
			require.True(t, want[slices.IndexFunc(want, func(p netip.Prefix) bool { return p.Addr().Is6() == a.Is6() })].Contains(a),
				"LB address %s must be in the node subnet", a)
		}
	}

	// With its IPAM, VIP source, endpoint and LB connections up, the proxy
	// is ready.
	require.Eventually(t, func() bool { return b.serving("Readiness") && b.serving("Liveness") }, converge, poll,
		"the proxy must report Readiness and Liveness on its health socket")

	// The VIP rules.
	vips := []netip.Prefix{netip.MustParsePrefix("20.0.0.1/32")}
	if len(families) == 2 {
		vips = append(vips, netip.MustParsePrefix("2001:db8::1/128"))
	}
	require.Eventually(t, func() bool {
		for _, v := range vips {
			if !hasSourceRule(t, b.proxyNS, v, table) {
				return false
			}
		}
		return true
	}, converge, poll, "rules from %v lookup %d", vips, table)

	// A target: its interface's peer is a bridge port, its addresses are in
	// the node subnets, and it reaches the bridge.
	targetNS := testutil.NewNetNS(t, "target")
	tgt := b.connectTarget(targetNS, "target-a", "nsm0")
	require.Equal(t, "nsm0", tgt.conn.GetMechanism().GetParameters()["name"])
	require.Eventually(t, func() bool {
		ports, _ := bridgePorts(t, b.proxyNS, bridge)
		l := slices.IndexFunc(vethsIn(t, targetNS), func(l netlink.Link) bool { return l.Attrs().Name == "nsm0" })
		return l >= 0 && peerIn(vethsIn(t, targetNS)[l], ports) != nil
	}, converge, poll, "the target's veth must end on the bridge")
	targetAddrs := globalPrefixes(t, targetNS, "nsm0")
	for _, bp := range want {
		i := slices.IndexFunc(targetAddrs, func(p netip.Prefix) bool { return p.Addr().Is6() == bp.Addr().Is6() })
		require.GreaterOrEqual(t, i, 0, "target address of the family of %s in %v", bp, targetAddrs)
		require.True(t, bp.Masked().Contains(targetAddrs[i].Addr()), "target address %s in the node subnet %s", targetAddrs[i], bp.Masked())
		require.NotEqual(t, bp.Addr(), targetAddrs[i].Addr())
		ping := "ping"
		if bp.Addr().Is6() {
			ping = "ping6"
		}
		if !assert.Eventually(t, func() bool {
			_, err := targetNS.Exec(ping, "-c1", "-W1", bp.Addr().String())
			return err == nil
		}, converge, poll, "the target must reach the bridge address %s", bp.Addr()) {
			dump(t, targetNS)
			t.FailNow()
		}
	}
	ports, _ := bridgePorts(t, b.proxyNS, bridge)
	require.Len(t, ports, 3, "two LBs and one target on the bridge")

	// `proxy -debug` asks the running proxy for its model.
	st := b.debugState()
	require.ElementsMatch(t, want, st.Proxy.State.BridgeAddrs)
	require.Len(t, st.Proxy.State.Ports, 3)
	require.Subset(t, st.Proxy.State.VIPs, vips)
	types := map[string]int{}
	for _, c := range st.Proxy.Connections {
		types[c.Type]++
	}
	require.Equal(t, map[string]int{"lb": 2, "target": 1}, types, "connections %+v", st.Proxy.Connections)

	// Traffic from a VIP: the target sends from the VIP to a server address
	// that only the LBs have; the proxy's main table has no route to it, so
	// only the VIP rule and the ECMP route of table 1 can take it there. The
	// LBs answer the VIP directly over the bridge.
	for i, v := range vips {
		server := netip.MustParseAddr("30.0.0.1")
		serverNet := "30.0.0.0/24"
		ping := "ping"
		if v.Addr().Is6() {
			server = netip.MustParseAddr("2001:db8:30::1")
			serverNet = "2001:db8:30::/64"
			ping = "ping6"
		}
		bp, tp := want[i], targetAddrs[i]
		require.Equal(t, bp.Addr().Is6(), v.Addr().Is6())
		require.Equal(t, tp.Addr().Is6(), v.Addr().Is6())
		targetNS.MustExec(t, "ip", "addr", "add", v.String(), "dev", "lo")
		targetNS.MustExec(t, "ip", "route", "add", serverNet, "via", bp.Addr().String(), "dev", "nsm0")
		for _, l := range b.lbs {
			l.ns.MustExec(t, "ip", "addr", "add", netip.PrefixFrom(server, server.BitLen()).String(), "dev", "lo")
			l.ns.MustExec(t, "ip", "route", "add", v.String(), "via", tp.Addr().String())
		}
		if !assert.Eventually(t, func() bool {
			_, err := targetNS.Exec(ping, "-c1", "-W1", "-I", v.Addr().String(), server.String())
			return err == nil
		}, converge, poll, "the target must reach %s from the VIP %s through an LB", server, v.Addr()) {
			dump(t, targetNS)
			t.FailNow()
		}
		_, err := targetNS.Exec(ping, "-c1", "-W1", server.String())
		require.Error(t, err, "without the VIP as source there is no way to %s", server)
	}

	// The VIP file changes: the rules follow.
	moved := netip.MustParsePrefix("20.0.0.2/32")
	require.NoError(t, os.WriteFile(b.vipFile, []byte(`
trenches: [{name: trench-a}]
vips:
  - {name: vip-v4, address: 20.0.0.2/32, trench: trench-a}
`), 0o644))
	require.Eventually(t, func() bool {
		return hasSourceRule(t, b.proxyNS, moved, table) && !slices.ContainsFunc(vips, func(v netip.Prefix) bool {
			return hasSourceRule(t, b.proxyNS, v, table)
		})
	}, converge, poll, "after the VIP file changed, the only rule must be from %s", moved)

	// The target leaves: its port goes, the LBs stay.
	targetPort := peerIn(vethsIn(t, targetNS)[0], ports)
	require.NotNil(t, targetPort)
	tgt.close(t)
	require.Eventually(t, func() bool {
		ports, _ := bridgePorts(t, b.proxyNS, bridge)
		return len(vethsIn(t, targetNS)) == 0 && len(ports) == 2 &&
			!slices.ContainsFunc(ports, func(l netlink.Link) bool { return l.Attrs().Index == targetPort.Attrs().Index })
	}, converge, poll, "the closed target's port must go")
	ports, _ = bridgePorts(t, b.proxyNS, bridge)

	// An LB goes away: its connection, port and nexthop follow.
	gone := b.lbs[0]
	gonePort := peerIn(vethsIn(t, gone.ns)[0], ports)
	require.NotNil(t, gonePort)
	gone.ep.Stop()
	require.Eventually(t, func() bool {
		ports, _ := bridgePorts(t, b.proxyNS, bridge)
		return len(vethsIn(t, gone.ns)) == 0 && len(ports) == 1 &&
			!slices.ContainsFunc(ports, func(l netlink.Link) bool { return l.Attrs().Index == gonePort.Attrs().Index }) &&
			nexthopsAre(b.lbs[1:])
	}, converge, poll, "the stopped LB's port and nexthop must go")
	// ... because the full mesh saw the endpoint go from the registry (a
	// heal toward a vanished endpoint would also remove the port, but keeps
	// retrying).
	b.proxy.waitLog(t, "load balancer endpoint removed", "nse", gone.name)

	// SIGTERM: a clean exit; the proxy leaves its LB connections for the
	// next run (docs/reliability.md).
	require.Equal(t, 0, b.proxy.stop(t, syscall.SIGTERM), "exit code on SIGTERM")
	require.Len(t, vethsIn(t, b.lbs[1].ns), 1, "the proxy leaves its LB connections when it stops")
	ok = true
}
