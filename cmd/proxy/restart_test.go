package main

import (
	"net/netip"
	"slices"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/testutil"
)

// TestProxyKernelRestart stops the proxy binary with SIGTERM while a target
// and an LB are connected, and starts it again in the same namespace (a
// container restart): the stop leaves the LB connection established, the
// new proxy adopts the bridge (same link, same MAC) and its address,
// resumes the LB connection on the same link with the same addresses (their
// leases kept, even with another allocation in between), and the target
// heals onto the new proxy with the same address and reaches the bridge
// again.
func TestProxyKernelRestart(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	b := startBed(t, bedConfig{ipFamily: "ipv4", lbs: 1})
	ok := false
	t.Cleanup(func() {
		if !ok {
			dump(t, b.proxyNS, b.lbs[0].ns)
		}
	})
	bridgeAddr := b.bridgeAddrs(ipamv1.IPFamily_IPV4)[0]
	lbJoined := func() bool {
		ports, _ := bridgePorts(t, b.proxyNS, bridge)
		v := vethsIn(t, b.lbs[0].ns)
		if len(v) != 1 || peerIn(v[0], ports) == nil {
			return false
		}
		lbAddr := byFamily(globalPrefixes(t, b.lbs[0].ns, v[0].Attrs().Name), ipamv1.IPFamily_IPV4)
		return slices.Equal(defaultNexthops(t, b.proxyNS, table, netlink.FAMILY_V4), lbAddr)
	}
	targetNS := testutil.NewNetNS(t, "target")
	targetJoined := func() bool {
		ports, _ := bridgePorts(t, b.proxyNS, bridge)
		i := slices.IndexFunc(vethsIn(t, targetNS), func(l netlink.Link) bool { return l.Attrs().Name == "nsm0" })
		return i >= 0 && peerIn(vethsIn(t, targetNS)[i], ports) != nil
	}
	reachesBridge := func() bool {
		_, err := targetNS.Exec("ping", "-c1", "-W1", bridgeAddr.Addr().String())
		return err == nil
	}

	require.Eventually(t, lbJoined, converge, poll, "LB connection before the restart")
	b.connectTarget(targetNS, "target-a", "nsm0")
	require.Eventually(t, func() bool { return targetJoined() && reachesBridge() }, converge, poll,
		"target connection before the restart")
	before := globalPrefixes(t, targetNS, "nsm0")
	require.Len(t, before, 1)
	bridgeLink := bridgeOf(t, b.proxyNS)
	lbLink := vethsIn(t, b.lbs[0].ns)[0]
	lbBefore := globalPrefixes(t, b.lbs[0].ns, lbLink.Attrs().Name)

	require.Equal(t, 0, b.proxy.stop(t, syscall.SIGTERM), "exit code on SIGTERM")
	// Another allocation in the node's subnet while the proxy is away: it
	// would take the LB's addresses if the stop had released them.
	squatter := b.allocate("squatter", ipamv1.IPFamily_IPV4)
	require.NotContains(t, lbBefore, squatter, "the stopped proxy's LB addresses stay leased")
	// The stopped proxy leaves the bridge, its address and the VIP rules in
	// place for its successor, as Meridio's does, and its LB connection too
	// (Meridio's closes it): the LB's link stays.
	require.Contains(t, globalPrefixes(t, b.proxyNS, bridge), bridgeAddr)
	require.True(t, hasSourceRule(t, b.proxyNS, netip.MustParsePrefix("20.0.0.1/32"), table))
	lbLinks := vethsIn(t, b.lbs[0].ns)
	require.Len(t, lbLinks, 1, "the stopped proxy leaves its LB connection")
	require.Equal(t, lbLink.Attrs().Index, lbLinks[0].Attrs().Index, "the stopped proxy leaves its LB connection")

	b.startProxy("proxy (restarted)")
	adopted := bridgeOf(t, b.proxyNS)
	require.Equal(t, bridgeLink.Attrs().Index, adopted.Attrs().Index, "the restarted proxy must adopt the bridge")
	require.Equal(t, bridgeLink.Attrs().HardwareAddr, adopted.Attrs().HardwareAddr, "the bridge keeps its MAC")
	require.Eventually(t, lbJoined, converge, poll, "LB connection after the restart")
	require.Equal(t, lbBefore, globalPrefixes(t, b.lbs[0].ns, vethsIn(t, b.lbs[0].ns)[0].Attrs().Name),
		"the LB keeps its address across the restart")
	require.Equal(t, lbLink.Attrs().Index, vethsIn(t, b.lbs[0].ns)[0].Attrs().Index,
		"the restarted proxy resumes the LB connection on its link")
	if !assert.Eventually(t, func() bool { return targetJoined() && reachesBridge() }, converge, poll,
		"the target must heal onto the restarted proxy") {
		dump(t, targetNS)
		t.FailNow()
	}
	require.Equal(t, before, globalPrefixes(t, targetNS, "nsm0"), "the target keeps its address across the restart")
	ports, _ := bridgePorts(t, b.proxyNS, bridge)
	require.Len(t, ports, 2, "one LB and one target")
	require.Equal(t, 0, b.proxy.stop(t, syscall.SIGTERM), "exit code of the restarted proxy on SIGTERM")
	ok = true
}

// bridgeOf returns the proxy's bridge.
func bridgeOf(t *testing.T, ns *testutil.NetNS) netlink.Link {
	t.Helper()
	h := nlHandle(t, ns)
	defer h.Close()
	l, err := h.LinkByName(bridge)
	require.NoError(t, err)
	return l
}
