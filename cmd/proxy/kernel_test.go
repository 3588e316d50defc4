package main

import (
	"net/netip"
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
// to the bridge, the loss of an LB, and a clean exit on SIGTERM.
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

	// An LB goes away: its connection, port and nexthop follow.
	gone := b.lbs[0]
	gonePort := peerIn(vethsIn(t, gone.ns)[0], ports)
	require.NotNil(t, gonePort)
	gone.ep.Stop()
	require.Eventually(t, func() bool {
		ports, _ := bridgePorts(t, b.proxyNS, bridge)
		return len(vethsIn(t, gone.ns)) == 0 && len(ports) == 2 &&
			!slices.ContainsFunc(ports, func(l netlink.Link) bool { return l.Attrs().Index == gonePort.Attrs().Index }) &&
			nexthopsAre(b.lbs[1:])
	}, converge, poll, "the stopped LB's port and nexthop must go")

	// SIGTERM: a clean exit; the proxy closes its LB connections on the way.
	require.Equal(t, 0, b.proxy.stop(t, syscall.SIGTERM), "exit code on SIGTERM")
	require.Eventually(t, func() bool { return len(vethsIn(t, b.lbs[1].ns)) == 0 }, converge, poll,
		"the proxy must close its LB connections when it stops")
	ok = true
}
