package dataplane

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/testutil"
)

func sortedAddrs(as ...netip.Addr) []netip.Addr {
	out := slices.Clone(as)
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

func sortedPfx(ps ...netip.Prefix) []netip.Prefix {
	out := slices.Clone(ps)
	slices.SortFunc(out, netip.Prefix.Compare)
	return out
}

func TestApplyKernelState(t *testing.T) {
	ns := testutil.NewNetNS(t, "dp")
	p1 := vethPair(t, ns, "p1", nil, "p1x")
	p2 := vethPair(t, ns, "p2", nil, "p2x")
	ns.MustExec(t, "ip", "link", "set", "p2", "mtu", "1400")
	ns.MustExec(t, "ip", "link", "set", "p2x", "mtu", "1400")
	dp := newDP(t, ns, Options{})
	h := handle(t, ns)

	// The bridge exists right after New: up, random locally administered
	// unicast MAC.
	br, err := h.LinkByName(DefaultBridgeName)
	require.NoError(t, err)
	require.Equal(t, "bridge", br.Type())
	mac := br.Attrs().HardwareAddr
	require.Equal(t, byte(0x02), mac[0]&0x03, "locally administered unicast MAC: %s", mac)
	require.NotZero(t, br.Attrs().Flags&net.FlagUp)
	require.Equal(t, mac, dp.BridgeMAC())

	s1 := State{
		BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24"), mp("fd00:cafe::1/64")},
		Ports:       portsOf(p1, p2),
		Nexthops:    []netip.Addr{ma("192.0.2.11"), ma("fd00:cafe::12"), ma("192.0.2.12"), ma("fd00:cafe::11")},
		VIPs:        []netip.Prefix{mp("203.0.113.10/32"), mp("203.0.113.32/28"), mp("2001:db8:100::10/128")},
	}
	require.NoError(t, dp.Apply(s1))

	check := func(s State) {
		t.Helper()
		br, err := h.LinkByName(DefaultBridgeName)
		require.NoError(t, err)
		// addresses
		addrs, err := h.AddrList(br, netlink.FAMILY_ALL)
		require.NoError(t, err)
		var got []netip.Prefix
		for _, a := range addrs {
			p, _ := ipNetToPrefix(a.IPNet)
			if managedAddr(p) {
				got = append(got, p)
			}
		}
		require.ElementsMatch(t, s.BridgeAddrs, got, "bridge addresses")
		// ports
		links, err := h.LinkList()
		require.NoError(t, err)
		var ports []int
		for _, l := range links {
			if l.Attrs().MasterIndex == br.Attrs().Index {
				ports = append(ports, l.Attrs().Index)
			}
		}
		require.ElementsMatch(t, indexes(s.Ports), ports, "ports")
		// routes
		var want4, want6 []netip.Addr
		for _, a := range s.Nexthops {
			if a.Is4() {
				want4 = append(want4, a)
			} else {
				want6 = append(want6, a)
			}
		}
		require.Equal(t, sortedAddrsOrNil(want4), defaultRouteNexthops(t, h, v4, 1, ProtocolCauseway), "ipv4 nexthops")
		require.Equal(t, sortedAddrsOrNil(want6), defaultRouteNexthops(t, h, v6, 1, ProtocolCauseway), "ipv6 nexthops")
		// rules
		require.ElementsMatch(t, s.VIPs, rulesOf(t, h, 1, ProtocolCauseway), "rules")
		// the same through ip(8)
		link := ns.MustExec(t, "ip", "-d", "link", "show", "dev", DefaultBridgeName)
		require.Contains(t, link, "link/ether "+br.Attrs().HardwareAddr.String())
		require.Contains(t, link, "bridge forward_delay")
		require.Contains(t, link, ",UP")
		addrOut := ns.MustExec(t, "ip", "addr", "show", "dev", DefaultBridgeName)
		for _, p := range s.BridgeAddrs {
			if p.Addr().Is4() {
				require.Contains(t, addrOut, "inet "+p.String()+" ")
			} else {
				require.Contains(t, addrOut, "inet6 "+p.String()+" ")
			}
		}
		for _, port := range s.Ports {
			out := ns.MustExec(t, "ip", "-d", "link", "show", "dev", linkName(t, h, port.Index))
			require.Contains(t, out, "master "+DefaultBridgeName)
			require.Contains(t, out, "bridge_slave")
		}
		r4 := ns.MustExec(t, "ip", "-4", "route", "show", "table", "1")
		r6 := ns.MustExec(t, "ip", "-6", "route", "show", "table", "1")
		checkIPRoute(t, r4, want4)
		checkIPRoute(t, r6, want6)
		rules := ns.MustExec(t, "ip", "-4", "rule", "show") + ns.MustExec(t, "ip", "-6", "rule", "show")
		for _, v := range s.VIPs {
			from := v.String()
			if v.IsSingleIP() {
				from = v.Addr().String()
			}
			require.Contains(t, rules, "from "+from+" lookup 1 proto 202")
		}
		require.Equal(t, len(s.VIPs), strings.Count(rules, "proto 202"), rules)
	}
	check(s1)
	// MTU follows the ports.
	require.Equal(t, 1400, mtuOf(t, h, DefaultBridgeName))

	// Change everything: a new IPv4 address in the same subnet, one
	// nexthop, one port and one VIP fewer, a new VIP.
	s2 := State{
		BridgeAddrs: []netip.Prefix{mp("192.0.2.2/24"), mp("fd00:cafe::1/64")},
		Ports:       portsOf(p1),
		Nexthops:    []netip.Addr{ma("192.0.2.12"), ma("fd00:cafe::11"), ma("fd00:cafe::12")},
		VIPs:        []netip.Prefix{mp("203.0.113.10/32"), mp("2001:db8:100::10/128"), mp("2001:db8:100::/120")},
	}
	require.NoError(t, dp.Apply(s2))
	check(s2)
	require.Equal(t, 1500, mtuOf(t, h, DefaultBridgeName))
	require.NotContains(t, ns.MustExec(t, "ip", "-d", "link", "show", "dev", "p2"), "master")
	require.Contains(t, ns.MustExec(t, "ip", "-4", "route", "show", "table", "1"), "default via 192.0.2.12 dev bridge0 proto 202")

	// The last IPv6 nexthop goes: the IPv6 route goes; IPv4 only.
	s3 := State{
		BridgeAddrs: []netip.Prefix{mp("192.0.2.2/24")},
		Ports:       portsOf(p1, p2),
		Nexthops:    []netip.Addr{ma("192.0.2.12"), ma("192.0.2.11")},
		VIPs:        []netip.Prefix{mp("203.0.113.10/32")},
	}
	require.NoError(t, dp.Apply(s3))
	check(s3)
	require.Empty(t, strings.TrimSpace(ns.MustExec(t, "ip", "-6", "route", "show", "table", "1")))

	// Empty state: everything of ours goes, the bridge stays.
	require.NoError(t, dp.Apply(State{}))
	check(State{})
	_, err = h.LinkByName(DefaultBridgeName)
	require.NoError(t, err)
}

func sortedAddrsOrNil(as []netip.Addr) []netip.Addr {
	if len(as) == 0 {
		return nil
	}
	return sortedAddrs(as...)
}

func checkIPRoute(t *testing.T, out string, nhs []netip.Addr) {
	t.Helper()
	switch len(nhs) {
	case 0:
		require.NotContains(t, out, "default")
	case 1:
		require.Contains(t, out, fmt.Sprintf("default via %s dev bridge0 proto 202", nhs[0]))
	default:
		require.Contains(t, out, "default proto 202")
		for _, a := range nhs {
			require.Contains(t, out, fmt.Sprintf("nexthop via %s dev bridge0 weight 1", a))
		}
		require.Equal(t, len(nhs), strings.Count(out, "nexthop via"), out)
	}
}

func linkName(t testing.TB, h *netlink.Handle, idx int) string {
	l, err := h.LinkByIndex(idx)
	require.NoError(t, err)
	return l.Attrs().Name
}

func mtuOf(t testing.TB, h *netlink.Handle, name string) int {
	l, err := h.LinkByName(name)
	require.NoError(t, err)
	return l.Attrs().MTU
}

func TestSysctls(t *testing.T) {
	ns := testutil.NewNetNS(t, "sy")
	dp := newDP(t, ns, Options{})
	want := map[string]string{
		"net.ipv4.ip_forward":                       "1",
		"net.ipv6.conf.all.forwarding":              "1",
		"net.ipv4.fib_multipath_hash_policy":        "1",
		"net.ipv6.fib_multipath_hash_policy":        "1",
		"net.ipv4.conf.all.rp_filter":               "0",
		"net.ipv4.conf.default.rp_filter":           "0",
		"net.ipv4.conf.bridge0.rp_filter":           "0",
		"net.ipv6.conf.all.accept_dad":              "0",
		"net.ipv6.conf.default.accept_dad":          "0",
		"net.ipv6.conf.bridge0.accept_dad":          "0",
		"net.ipv4.conf.bridge0.promote_secondaries": "1",
	}
	for k, v := range want {
		got := strings.TrimSpace(ns.MustExec(t, "sysctl", "-n", k))
		assert.Equal(t, v, got, k)
	}
	snap, err := dp.Snapshot()
	require.NoError(t, err)
	for k, v := range want {
		assert.Equal(t, v, snap.Sysctls[k], k)
	}
	require.Empty(t, snap.SysctlErrors)

	// What cannot be set is reported, with its key.
	_, err = setSysctls(ns.Handle, "", []sysctl{{"net.ipv4.no_such_setting", "1"}})
	var se *SysctlError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "net.ipv4.no_such_setting", se.Key)
}

func TestIdempotentApply(t *testing.T) {
	ns := testutil.NewNetNS(t, "id")
	p1 := vethPair(t, ns, "p1", nil, "p1x")
	p2 := vethPair(t, ns, "p2", nil, "p2x")
	dp := newDP(t, ns, Options{})
	s := State{
		BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24"), mp("fd00:cafe::1/64")},
		Ports:       portsOf(p1, p2, 4242), // 4242 does not exist
		Nexthops:    []netip.Addr{ma("192.0.2.11"), ma("192.0.2.12"), ma("fd00:cafe::11")},
		VIPs:        []netip.Prefix{mp("203.0.113.10/32"), mp("2001:db8:100::10/128")},
	}
	require.NoError(t, dp.Apply(s))
	before := dp.Stats()
	// Same state, other order, duplicates, a mapped address.
	s2 := State{
		BridgeAddrs: []netip.Prefix{mp("fd00:cafe::1/64"), mp("192.0.2.1/24")},
		Ports:       portsOf(4242, p2, p1, p1),
		Nexthops:    []netip.Addr{ma("fd00:cafe::11"), ma("::ffff:192.0.2.12"), ma("192.0.2.11"), ma("192.0.2.11")},
		VIPs:        []netip.Prefix{mp("2001:db8:100::10/128"), mp("203.0.113.10/32")},
	}
	for range 3 {
		require.NoError(t, dp.Apply(s2))
	}
	after := dp.Stats()
	require.Equal(t, before.Writes, after.Writes, "an identical Apply writes nothing")
}

func TestIncrementalApplyIsConstant(t *testing.T) {
	ns := testutil.NewNetNS(t, "inc")
	dp := newDP(t, ns, Options{})
	s := bigState(1000, 64, 64)
	start := dp.Stats().Writes
	require.NoError(t, dp.Apply(s))
	full := dp.Stats().Writes - start
	// 1000 rules, 2 addresses, 1 route per family.
	require.Equal(t, uint64(1000+2+2), full)

	step := func(name string, s State, want uint64) {
		t.Helper()
		before := dp.Stats().Writes
		require.NoError(t, dp.Apply(s))
		require.Equal(t, want, dp.Stats().Writes-before, name)
	}
	s.VIPs = append(s.VIPs, mp("198.51.100.200/32"))
	step("add a VIP", s, 1)
	s.VIPs = s.VIPs[1:]
	step("remove a VIP", s, 1)
	s.Nexthops = append(s.Nexthops, ma("192.0.2.250"))
	step("add a nexthop", s, 1)
	s.Nexthops = s.Nexthops[1:]
	step("remove a nexthop", s, 1)
	step("nothing", s, 0)
	require.Len(t, rulesOf(t, handle(t, ns), 1, ProtocolCauseway), 1000)
}

// bigState has nVIPs IPv4 VIPs, nNH4 IPv4 and nNH6 IPv6 nexthops.
func bigState(nVIPs, nNH4, nNH6 int) State {
	s := State{BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24"), mp("fd00:cafe::1/64")}}
	for i := range nVIPs {
		s.VIPs = append(s.VIPs, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}), 32))
	}
	for i := range nNH4 {
		s.Nexthops = append(s.Nexthops, netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)}))
	}
	for i := range nNH6 {
		s.Nexthops = append(s.Nexthops, netip.AddrFrom16([16]byte{0xfd, 0, 0xca, 0xfe, 15: byte(10 + i)}))
	}
	return s
}

func TestRestartReplacesOnlyLeftovers(t *testing.T) {
	ns := testutil.NewNetNS(t, "rs")
	p1 := vethPair(t, ns, "p1", nil, "p1x")
	h := handle(t, ns)
	dp1, err := New(ctx, Options{NetNS: ns.Handle, Logger: testLogger(t)})
	require.NoError(t, err)
	s1 := State{
		BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24"), mp("fd00:cafe::1/64")},
		Ports:       portsOf(p1),
		Nexthops:    []netip.Addr{ma("192.0.2.11"), ma("192.0.2.12"), ma("fd00:cafe::11")},
		VIPs:        []netip.Prefix{mp("203.0.113.10/32"), mp("203.0.113.11/32"), mp("2001:db8:100::10/128")},
	}
	require.NoError(t, dp1.Apply(s1))
	mac := dp1.BridgeMAC()
	// Foreign objects in the same table: rules of another owner (a
	// protocol of their own, or another selector beside the source; a
	// plain `from <prefix>` rule without protocol has Meridio's shape and
	// is removed at start, see TestStartRemovesMeridioLeftovers).
	ns.MustExec(t, "ip", "rule", "add", "from", "198.51.100.77", "lookup", "1", "proto", "static")
	ns.MustExec(t, "ip", "rule", "add", "from", "203.0.113.10", "lookup", "1", "proto", "static") // same selector as a VIP of ours
	ns.MustExec(t, "ip", "rule", "add", "from", "198.51.100.78", "fwmark", "7", "lookup", "1")
	ns.MustExec(t, "ip", "route", "add", "198.51.100.0/24", "via", "192.0.2.99", "table", "1")
	require.NoError(t, dp1.Close())
	// Close changed nothing.
	require.Len(t, rulesOf(t, h, 1, ProtocolCauseway), 3)

	dp2 := newDP(t, ns, Options{})
	require.Equal(t, mac, dp2.BridgeMAC(), "the bridge keeps its MAC across a restart")
	// Our leftovers are gone, foreign objects stay.
	require.Empty(t, rulesOf(t, h, 1, ProtocolCauseway))
	require.Nil(t, defaultRouteNexthops(t, h, v4, 1, ProtocolCauseway))
	require.Nil(t, defaultRouteNexthops(t, h, v6, 1, ProtocolCauseway))
	foreign := rulesOf(t, h, 1, unix.RTPROT_STATIC)
	require.ElementsMatch(t, []netip.Prefix{mp("198.51.100.77/32"), mp("203.0.113.10/32")}, foreign)
	require.Equal(t, []netip.Prefix{mp("198.51.100.78/32")}, rulesOf(t, h, 1, 0), "the fwmark rule stays")
	require.Contains(t, ns.MustExec(t, "ip", "route", "show", "table", "1"), "198.51.100.0/24 via 192.0.2.99")
	// The adopted bridge still has its addresses and port until the first
	// Apply.
	require.Contains(t, ns.MustExec(t, "ip", "addr", "show", "dev", "bridge0"), "192.0.2.1/24")
	require.Contains(t, ns.MustExec(t, "ip", "link", "show", "dev", "p1"), "master bridge0")

	s2 := State{
		BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24")},
		Nexthops:    []netip.Addr{ma("192.0.2.13")},
		VIPs:        []netip.Prefix{mp("203.0.113.11/32"), mp("203.0.113.12/32")},
	}
	require.NoError(t, dp2.Apply(s2))
	require.ElementsMatch(t, s2.VIPs, rulesOf(t, h, 1, ProtocolCauseway))
	require.Equal(t, []netip.Addr{ma("192.0.2.13")}, defaultRouteNexthops(t, h, v4, 1, ProtocolCauseway))
	require.Nil(t, defaultRouteNexthops(t, h, v6, 1, ProtocolCauseway))
	require.ElementsMatch(t, foreign, rulesOf(t, h, 1, unix.RTPROT_STATIC))
	require.Len(t, rulesOf(t, h, 1, 0), 1)
	require.NotContains(t, ns.MustExec(t, "ip", "link", "show", "dev", "p1"), "master")
	require.NotContains(t, ns.MustExec(t, "ip", "addr", "show", "dev", "bridge0"), "fd00:cafe::1")
	require.Contains(t, ns.MustExec(t, "ip", "route", "show", "table", "1"), "198.51.100.0/24 via 192.0.2.99")
	require.NoError(t, dp2.Close())

	// AdoptLeftovers: the same state again costs no write at all.
	dp3 := newDP(t, ns, Options{AdoptLeftovers: true})
	require.ElementsMatch(t, s2.VIPs, rulesOf(t, h, 1, ProtocolCauseway), "leftovers kept until the first Apply")
	before := dp3.Stats().Writes
	require.NoError(t, dp3.Apply(s2))
	require.Equal(t, before, dp3.Stats().Writes)
	require.Equal(t, mac, dp3.BridgeMAC())
}

func TestTeardownAndMACFile(t *testing.T) {
	ns := testutil.NewNetNS(t, "td")
	h := handle(t, ns)
	macFile := filepath.Join(t.TempDir(), "state", "bridge-mac")
	dp, err := New(ctx, Options{NetNS: ns.Handle, Logger: testLogger(t), MACFile: macFile})
	require.NoError(t, err)
	mac := dp.BridgeMAC()
	require.NoError(t, dp.Apply(State{
		BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24")},
		Nexthops:    []netip.Addr{ma("192.0.2.11")},
		VIPs:        []netip.Prefix{mp("203.0.113.10/32")},
	}))
	ns.MustExec(t, "ip", "rule", "add", "from", "198.51.100.77", "lookup", "1", "proto", "static")
	require.NoError(t, dp.Teardown())
	require.ErrorIs(t, dp.Apply(State{}), ErrClosed)
	_, err = h.LinkByName("bridge0")
	require.Error(t, err, "teardown removes the bridge")
	require.Empty(t, rulesOf(t, h, 1, ProtocolCauseway))
	require.Nil(t, defaultRouteNexthops(t, h, v4, 1, ProtocolCauseway))
	require.Len(t, rulesOf(t, h, 1, unix.RTPROT_STATIC), 1, "teardown leaves foreign rules")

	// A new bridge takes the MAC from the file.
	dp2 := newDP(t, ns, Options{MACFile: macFile})
	require.Equal(t, mac, dp2.BridgeMAC())
	br, err := h.LinkByName("bridge0")
	require.NoError(t, err)
	require.Equal(t, mac, br.Attrs().HardwareAddr)
}

func TestSelfHealing(t *testing.T) {
	ns := testutil.NewNetNS(t, "sh")
	p1 := vethPair(t, ns, "p1", nil, "p1x")
	h := handle(t, ns)
	// No periodic re-sync: the repairs below come from kernel events.
	dp := newDP(t, ns, Options{ResyncInterval: -1})
	s := State{
		BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24"), mp("fd00:cafe::1/64")},
		Ports:       portsOf(p1),
		Nexthops:    []netip.Addr{ma("192.0.2.11"), ma("192.0.2.12"), ma("fd00:cafe::11"), ma("fd00:cafe::12")},
		VIPs:        []netip.Prefix{mp("203.0.113.10/32"), mp("203.0.113.11/32"), mp("2001:db8:100::10/128")},
	}
	require.NoError(t, dp.Apply(s))
	nh4 := []netip.Addr{ma("192.0.2.11"), ma("192.0.2.12")}
	nh6 := []netip.Addr{ma("fd00:cafe::11"), ma("fd00:cafe::12")}
	rulesOK := func() bool {
		return assert.ObjectsAreEqual(sortedPfx(s.VIPs...), sortedPfx(rulesOf(t, h, 1, ProtocolCauseway)...))
	}
	routesOK := func() bool {
		return slices.Equal(nh4, defaultRouteNexthops(t, h, v4, 1, ProtocolCauseway)) &&
			slices.Equal(nh6, defaultRouteNexthops(t, h, v6, 1, ProtocolCauseway))
	}

	ns.MustExec(t, "ip", "rule", "del", "from", "203.0.113.11", "lookup", "1")
	ns.MustExec(t, "ip", "-6", "rule", "del", "from", "2001:db8:100::10", "lookup", "1")
	eventually(t, rulesOK, "deleted rules come back")
	ns.MustExec(t, "ip", "route", "del", "default", "table", "1")
	eventually(t, routesOK, "deleted IPv4 route comes back")
	ns.MustExec(t, "ip", "-6", "route", "replace", "default", "via", "fd00:cafe::99", "dev", "bridge0", "table", "1", "proto", "202")
	eventually(t, routesOK, "a rewritten IPv6 route is restored")

	ns.MustExec(t, "ip", "link", "set", "p1", "nomaster")
	eventually(t, func() bool {
		l, err := h.LinkByIndex(p1)
		return err == nil && l.Attrs().MasterIndex == dp.BridgeIndex()
	}, "a released port is enslaved again")

	ns.MustExec(t, "ip", "addr", "del", "192.0.2.1/24", "dev", "bridge0")
	eventually(t, func() bool {
		return strings.Contains(ns.MustExec(t, "ip", "addr", "show", "dev", "bridge0"), "192.0.2.1/24")
	}, "a deleted bridge address comes back")

	// Down: IPv4 routes over the bridge and IPv6 addresses go with it.
	ns.MustExec(t, "ip", "link", "set", "bridge0", "down")
	eventually(t, func() bool {
		out := ns.MustExec(t, "ip", "addr", "show", "dev", "bridge0")
		return strings.Contains(out, ",UP") && strings.Contains(out, "fd00:cafe::1/64") && routesOK()
	}, "the bridge comes back up with its addresses and routes: %s",
		func() string {
			return ns.MustExec(t, "ip", "addr") + ns.MustExec(t, "ip", "route", "show", "table", "all")
		}())

	// Deleted: re-created with the same MAC and everything on it.
	mac := dp.BridgeMAC()
	ns.MustExec(t, "ip", "link", "del", "bridge0")
	eventually(t, func() bool {
		br, err := h.LinkByName("bridge0")
		if err != nil || br.Attrs().HardwareAddr.String() != mac.String() {
			return false
		}
		l, err := h.LinkByIndex(p1)
		return err == nil && l.Attrs().MasterIndex == br.Attrs().Index && routesOK() && rulesOK() &&
			strings.Contains(ns.MustExec(t, "ip", "addr", "show", "dev", "bridge0"), "192.0.2.1/24")
	}, "a deleted bridge is re-created with its MAC, addresses, port and routes")
	require.Positive(t, dp.Stats().Restores)

	// After all that, the model agrees with the kernel: no write.
	before := dp.Stats().Writes
	require.NoError(t, dp.Apply(s))
	require.NoError(t, dp.Resync())
	require.Equal(t, before, dp.Stats().Writes)
}

func TestPortsThatVanish(t *testing.T) {
	ns := testutil.NewNetNS(t, "pv")
	p1 := vethPair(t, ns, "p1", nil, "p1x")
	p2 := vethPair(t, ns, "p2", nil, "p2x")
	h := handle(t, ns)
	dp := newDP(t, ns, Options{})
	s := State{
		BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24")},
		Ports: tiedPorts(portsOf(p1, p2, 9999), map[netip.Addr]int{
			ma("192.0.2.11"): p1,
			ma("192.0.2.12"): p2,
		}),
		Nexthops: []netip.Addr{ma("192.0.2.11"), ma("192.0.2.12")},
	}
	require.NoError(t, dp.Apply(s), "a port that does not exist is no error")
	require.Equal(t, []netip.Addr{ma("192.0.2.11"), ma("192.0.2.12")}, defaultRouteNexthops(t, h, v4, 1, ProtocolCauseway))

	// p1's link goes: its nexthop leaves the route without any Apply.
	ns.MustExec(t, "ip", "link", "del", "p1")
	eventually(t, func() bool {
		return slices.Equal([]netip.Addr{ma("192.0.2.12")}, defaultRouteNexthops(t, h, v4, 1, ProtocolCauseway))
	}, "nexthop tied to a deleted port leaves the route")
	snap, err := dp.Snapshot()
	require.NoError(t, err)
	require.Equal(t, []int{p1, 9999}, snap.AbsentPorts)

	// The caller re-applies the same state: no error and no write.
	before := dp.Stats().Writes
	for range 3 {
		require.NoError(t, dp.Apply(s))
	}
	require.Equal(t, before, dp.Stats().Writes)

	// The last tied port goes too: no route.
	ns.MustExec(t, "ip", "link", "del", "p2")
	eventually(t, func() bool { return defaultRouteNexthops(t, h, v4, 1, ProtocolCauseway) == nil }, "route removed")

	// A port that appears after Apply asked for it is enslaved.
	ns.MustExec(t, "ip", "link", "add", "late", "type", "veth", "peer", "name", "latex")
	late := ns.LinkIndex(t, "late")
	s.Ports = append(s.Ports, Port{Index: late})
	require.NoError(t, dp.Apply(s))
	l, err := h.LinkByIndex(late)
	require.NoError(t, err)
	require.Equal(t, dp.BridgeIndex(), l.Attrs().MasterIndex)
}

func TestSnapshotJSON(t *testing.T) {
	ns := testutil.NewNetNS(t, "sn")
	p1 := vethPair(t, ns, "p1", nil, "p1x")
	dp := newDP(t, ns, Options{})
	require.NoError(t, dp.Apply(State{
		BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24")},
		Ports:       portsOf(p1),
		Nexthops:    []netip.Addr{ma("192.0.2.11"), ma("192.0.2.12")},
		VIPs:        []netip.Prefix{mp("203.0.113.10/32")},
	}))
	ns.MustExec(t, "ip", "rule", "add", "from", "198.51.100.77", "lookup", "1")
	snap, err := dp.Snapshot()
	require.NoError(t, err)
	require.Equal(t, "bridge0", snap.Bridge.Name)
	require.Equal(t, []netip.Prefix{mp("192.0.2.1/24")}, snap.Bridge.Addrs[:1])
	require.Len(t, snap.Ports, 1)
	require.Equal(t, "p1", snap.Ports[0].Name)
	require.Len(t, snap.Routes, 1)
	require.True(t, snap.Routes[0].Owned)
	require.Len(t, snap.Routes[0].Nexthops, 2)
	require.Equal(t, "bridge0", snap.Routes[0].Nexthops[0].Dev)
	require.Len(t, snap.Rules, 2)
	b, err := json.MarshalIndent(snap, "", "  ")
	require.NoError(t, err)
	for _, s := range []string{`"mac"`, `"203.0.113.10/32"`, `"owned": true`, `"owned": false`, `"via": "192.0.2.11"`, `"writesByOp"`} {
		require.Contains(t, string(b), s)
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, o := range []Options{{Table: 254}, {Table: 255}, {Protocol: 3}, {BridgeName: "a-very-long-bridge-name"}} {
		_, err := New(ctx, o)
		require.Error(t, err, "%+v", o)
	}
}

func TestNotABridge(t *testing.T) {
	ns := testutil.NewNetNS(t, "nb")
	ns.MustExec(t, "ip", "link", "add", "bridge0", "type", "veth", "peer", "name", "bx")
	_, err := New(ctx, Options{NetNS: ns.Handle, Logger: testLogger(t)})
	require.ErrorContains(t, err, "not a bridge")
}

func TestConcurrentUse(t *testing.T) {
	ns := testutil.NewNetNS(t, "cc")
	var ports []int
	for i := range 4 {
		ports = append(ports, vethPair(t, ns, fmt.Sprintf("p%d", i), nil, fmt.Sprintf("p%dx", i)))
	}
	h := handle(t, ns)
	dp := newDP(t, ns, Options{})
	ch, cancel := dp.Subscribe()
	events := collect(ch)
	defer func() {
		cancel()
		events.wg.Wait()
	}()
	states := make([]State, 4)
	for i := range states {
		states[i] = State{
			BridgeAddrs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(1 + i)}), 24), mp("fd00:cafe::1/64")},
			Ports:       portsOf(ports[:i+1]...),
			Nexthops:    []netip.Addr{netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)}), ma("fd00:cafe::11")},
			VIPs:        []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}), 32), mp("203.0.113.100/32")},
		}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				assert.NoError(t, dp.Apply(states[(g+i)%len(states)]))
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 25 {
			_, err := dp.Snapshot()
			assert.NoError(t, err)
			_ = dp.Stats()
			_ = dp.Links()
			assert.NoError(t, dp.FlushConntrack(ma("203.0.113.100")))
		}
	}()
	for i := range 10 {
		ns.MustExec(t, "ip", "link", "add", fmt.Sprintf("c%d", i), "type", "veth", "peer", "name", fmt.Sprintf("c%dx", i))
		ns.MustExec(t, "ip", "link", "del", fmt.Sprintf("c%d", i))
	}
	wg.Wait()

	final := states[2]
	require.NoError(t, dp.Apply(final))
	require.NoError(t, dp.Resync())
	before := dp.Stats().Writes
	require.NoError(t, dp.Apply(final))
	require.NoError(t, dp.Resync())
	require.Equal(t, before, dp.Stats().Writes, "model and kernel agree")
	require.ElementsMatch(t, final.VIPs, rulesOf(t, h, 1, ProtocolCauseway))
	require.Equal(t, []netip.Addr{ma("192.0.2.12")}, defaultRouteNexthops(t, h, v4, 1, ProtocolCauseway))
	require.Contains(t, ns.MustExec(t, "ip", "addr", "show", "dev", "bridge0"), "192.0.2.3/24")
}

func TestCustomTableProtocolAndBridge(t *testing.T) {
	ns := testutil.NewNetNS(t, "ctp")
	h := handle(t, ns)
	dp := newDP(t, ns, Options{BridgeName: "br.cw", Table: 1000, Protocol: 250, ResyncInterval: -1})
	s := State{
		BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24"), mp("fd00:cafe::1/64")},
		Nexthops:    []netip.Addr{ma("192.0.2.11"), ma("fd00:cafe::11"), ma("fd00:cafe::12")},
		VIPs:        []netip.Prefix{mp("203.0.113.10/32"), mp("2001:db8:100::10/128")},
	}
	require.NoError(t, dp.Apply(s))
	require.ElementsMatch(t, s.VIPs, rulesOf(t, h, 1000, 250))
	require.Equal(t, []netip.Addr{ma("192.0.2.11")}, defaultRouteNexthops(t, h, v4, 1000, 250))
	require.Equal(t, []netip.Addr{ma("fd00:cafe::11"), ma("fd00:cafe::12")}, defaultRouteNexthops(t, h, v6, 1000, 250))
	require.Contains(t, ns.MustExec(t, "ip", "-6", "rule"), "from 2001:db8:100::10 lookup 1000 proto 250")
	require.Equal(t, "0", strings.TrimSpace(ns.MustExec(t, "sysctl", "-n", "net/ipv4/conf/br.cw/rp_filter")))
	ns.MustExec(t, "ip", "-6", "rule", "del", "from", "2001:db8:100::10", "lookup", "1000")
	ns.MustExec(t, "ip", "-6", "route", "del", "default", "table", "1000")
	eventually(t, func() bool {
		return len(rulesOf(t, h, 1000, 250)) == 2 && len(defaultRouteNexthops(t, h, v6, 1000, 250)) == 2
	}, "restored in table 1000")
}

// TestFreshPortIsEnslaved: a link created just before the Apply that wants
// it (the link table may not have seen it yet) becomes a port at once,
// and the nexthop tied to it is in the route.
func TestFreshPortIsEnslaved(t *testing.T) {
	ns := testutil.NewNetNS(t, "fresh")
	h := handle(t, ns)
	dp := newDP(t, ns, Options{})
	nh := ma("192.0.2.11")
	for i := range 20 {
		name := fmt.Sprintf("f%d", i)
		require.NoError(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "x"}))
		l, err := h.LinkByName(name)
		require.NoError(t, err)
		require.NoError(t, dp.Apply(State{
			BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24")},
			Ports:       []Port{{Index: l.Attrs().Index, Nexthops: []netip.Addr{nh}}},
			Nexthops:    []netip.Addr{nh},
		}))
		require.Equal(t, []netip.Addr{nh}, defaultRouteNexthops(t, h, v4, 1, ProtocolCauseway), "trial %d", i)
		l, err = h.LinkByIndex(l.Attrs().Index)
		require.NoError(t, err)
		require.Equal(t, dp.BridgeIndex(), l.Attrs().MasterIndex, "trial %d", i)
	}
}

// TestBringUpReadsNoTables: ports added one Apply at a time (targets
// coming up) cost no read of whole tables by the reconciler, even when the
// link table's view lags behind the Dataplane's own writes: a port whose
// notification disagrees is read back alone.
func TestBringUpReadsNoTables(t *testing.T) {
	ns := testutil.NewNetNS(t, "bring")
	h := handle(t, ns)
	const n = 200
	ports := make([]int, 0, n)
	for i := range n {
		name := fmt.Sprintf("b%d", i)
		require.NoError(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "x"}))
		l, err := h.LinkByName(name)
		require.NoError(t, err)
		ports = append(ports, l.Attrs().Index)
	}
	dp := newDP(t, ns, Options{ResyncInterval: -1, AnnounceCount: -1})
	before := dp.Stats()
	s := State{BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24")}, VIPs: []netip.Prefix{mp("203.0.113.10/32")}}
	require.NoError(t, dp.Apply(s))
	for i := range n {
		s.Ports = portsOf(ports[:i+1]...)
		require.NoError(t, dp.Apply(s))
	}
	eventually(t, func() bool {
		links, err := h.LinkList()
		if err != nil {
			return false
		}
		enslaved := 0
		for _, l := range links {
			if l.Attrs().MasterIndex == dp.BridgeIndex() {
				enslaved++
			}
		}
		return enslaved == n
	}, "every port enslaved")
	// Let the reconciler handle the last notifications.
	time.Sleep(100 * time.Millisecond)
	after := dp.Stats()
	t.Logf("FIGURE: bringing up %d ports one Apply at a time: %d netlink reads, %d reconciler passes that read whole tables",
		n, after.Reads-before.Reads, after.Reconciles-before.Reconciles)
	require.Zero(t, after.Reconciles-before.Reconciles, "no table was read back")
	require.Equal(t, uint64(n+2), after.Writes-before.Writes, "one write per port, the address and the rule")
}
