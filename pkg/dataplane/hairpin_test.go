package dataplane

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/testutil"
)

// hairpinOf reads the hairpin mode of bridge port idx from the kernel.
func hairpinOf(t *testing.T, h *netlink.Handle, idx int) bool {
	t.Helper()
	l, err := h.LinkByIndex(idx)
	require.NoError(t, err)
	pi, err := h.LinkGetProtinfo(l)
	require.NoError(t, err)
	return pi.Hairpin
}

// TestHairpinPorts: the hairpin mode of the ports follows the State, set
// when a port joins and turned off when it loses it; an identical
// Apply writes nothing.
func TestHairpinPorts(t *testing.T) {
	ns := testutil.NewNetNS(t, "hp")
	p1 := vethPair(t, ns, "p1", nil, "p1x")
	p2 := vethPair(t, ns, "p2", nil, "p2x")
	h := handle(t, ns)
	dp := newDP(t, ns, Options{})
	s := State{BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24")}, Ports: []Port{{Index: p1, Hairpin: true}, {Index: p2}}}
	require.NoError(t, dp.Apply(s))
	require.True(t, hairpinOf(t, h, p1), "p1 in hairpin mode")
	require.False(t, hairpinOf(t, h, p2), "p2 not")

	before := dp.Stats().Writes
	require.NoError(t, dp.Apply(s))
	require.Equal(t, before, dp.Stats().Writes, "an identical Apply writes nothing")

	s.Ports = []Port{{Index: p1}, {Index: p2, Hairpin: true}}
	require.NoError(t, dp.Apply(s))
	require.False(t, hairpinOf(t, h, p1), "p1 left the list")
	require.True(t, hairpinOf(t, h, p2), "p2 joined it")

	// A port that appears later gets its mode when it is enslaved.
	ns.MustExec(t, "ip", "link", "add", "late", "type", "veth", "peer", "name", "latex")
	late := ns.LinkIndex(t, "late")
	s.Ports = append(s.Ports, Port{Index: late, Hairpin: true})
	require.NoError(t, dp.Apply(s))
	require.True(t, hairpinOf(t, h, late), "a new port in hairpin mode")
	snap, err := dp.Snapshot()
	require.NoError(t, err)
	require.Equal(t, []Port{{Index: p1}, {Index: p2, Hairpin: true}, {Index: late, Hairpin: true}}, snap.Desired.Ports)
}

// BridgeNetfilter: New hands bridged frames to netfilter in the namespace
// (the nftables service provider needs it) and Snapshot reports it.
func TestBridgeNetfilter(t *testing.T) {
	ns := testutil.NewNetNS(t, "bnf")
	dp := newDP(t, ns, Options{BridgeNetfilter: true})
	for _, key := range []string{"net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables"} {
		require.Equal(t, "1", strings.TrimSpace(ns.MustExec(t, "sysctl", "-n", key)), key)
	}
	snap, err := dp.Snapshot()
	require.NoError(t, err)
	require.Equal(t, "1", snap.Sysctls["net.bridge.bridge-nf-call-iptables"])
}
