package dataplane

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/testutil"
)

// meridioLayout sets ns up the way Meridio's proxy leaves it, with the
// same netlink calls and the same zero fields: bridge0 with an address and
// a port, one `from <VIP> lookup 1` rule per VIP (RuleAdd without
// protocol) and one multipath default route per family in table 1
// (RouteReplace without protocol).
func meridioLayout(t *testing.T, ns *testutil.NetNS, h *netlink.Handle, vips []netip.Prefix, nhs4, nhs6 []netip.Addr) {
	t.Helper()
	require.NoError(t, h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "bridge0"}}))
	br, err := h.LinkByName("bridge0")
	require.NoError(t, err)
	require.NoError(t, h.LinkSetUp(br))
	for _, a := range []string{"192.0.2.1/24", "fd00:cafe::1/64"} {
		addr, err := netlink.ParseAddr(a)
		require.NoError(t, err)
		require.NoError(t, h.AddrAdd(br, addr))
	}
	vethPair(t, ns, "p1", nil, "p1x")
	ns.MustExec(t, "ip", "link", "set", "p1", "master", "bridge0")
	for _, v := range vips {
		r := netlink.NewRule()
		r.Table = 1
		r.Src = prefixToIPNet(v)
		r.Family = familyOf(v.Addr()).af()
		require.NoError(t, h.RuleAdd(r))
	}
	multipath := func(src net.IP, nhs []netip.Addr) *netlink.Route {
		dst := &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}
		if src.To4() == nil {
			dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
		}
		r := &netlink.Route{Table: 1, Dst: dst, Src: src}
		for _, a := range nhs {
			r.MultiPath = append(r.MultiPath, &netlink.NexthopInfo{LinkIndex: br.Attrs().Index, Gw: a.AsSlice()})
		}
		return r
	}
	require.NoError(t, h.RouteReplace(multipath(net.IPv4zero, nhs4)))
	require.NoError(t, h.RouteReplace(multipath(nil, nhs6)))
}

// rulesFor returns the rules of table whose source is p, of any protocol.
func rulesFor(t *testing.T, h *netlink.Handle, table int, p netip.Prefix) []netlink.Rule {
	t.Helper()
	rules, err := h.RuleListFiltered(netlink.FAMILY_ALL, &netlink.Rule{Table: table}, netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	var out []netlink.Rule
	for _, r := range rules {
		if src, ok := ipNetToPrefix(r.Src); ok && src == p {
			out = append(out, r)
		}
	}
	return out
}

func TestStartRemovesMeridioLeftovers(t *testing.T) {
	ns := testutil.NewNetNS(t, "mer")
	h := handle(t, ns)
	vips := []netip.Prefix{mp("20.0.0.1/32"), mp("20.0.0.2/32"), mp("2001:db8:20::1/128")}
	nhs4 := []netip.Addr{ma("192.0.2.3"), ma("192.0.2.4")}
	nhs6 := []netip.Addr{ma("fd00:cafe::3"), ma("fd00:cafe::4")}
	meridioLayout(t, ns, h, vips, nhs4, nhs6)
	require.Len(t, rulesOf(t, h, 1, unix.RTPROT_UNSPEC), 3, "Meridio's RuleAdd leaves no protocol")
	require.ElementsMatch(t, nhs4, defaultRouteNexthops(t, h, v4, 1, unix.RTPROT_BOOT), "Meridio's RouteReplace leaves protocol boot")
	require.ElementsMatch(t, nhs6, defaultRouteNexthops(t, h, v6, 1, unix.RTPROT_BOOT))

	// State that is not Meridio's: a rule to another table, rules of
	// other owners into table 1 (a protocol of their own, other selectors),
	// a route to another destination in table 1, a default route in
	// another table.
	ns.MustExec(t, "ip", "rule", "add", "from", "20.0.0.1", "lookup", "100")
	ns.MustExec(t, "ip", "rule", "add", "from", "20.0.0.2", "lookup", "1", "proto", "static")
	ns.MustExec(t, "ip", "rule", "add", "from", "198.51.100.78", "fwmark", "7", "lookup", "1")
	ns.MustExec(t, "ip", "rule", "add", "from", "198.51.100.79", "iif", "p1", "lookup", "1")
	ns.MustExec(t, "ip", "route", "add", "198.51.100.0/24", "via", "192.0.2.99", "table", "1")
	ns.MustExec(t, "ip", "route", "add", "default", "via", "192.0.2.98", "table", "100")
	foreign := func() {
		t.Helper()
		require.Equal(t, []netip.Prefix{mp("20.0.0.1/32")}, rulesOf(t, h, 100, unix.RTPROT_UNSPEC))
		require.Equal(t, []netip.Prefix{mp("20.0.0.2/32")}, rulesOf(t, h, 1, unix.RTPROT_STATIC))
		require.ElementsMatch(t, []netip.Prefix{mp("198.51.100.78/32"), mp("198.51.100.79/32")}, rulesOf(t, h, 1, unix.RTPROT_UNSPEC))
		require.Contains(t, ns.MustExec(t, "ip", "route", "show", "table", "1"), "198.51.100.0/24 via 192.0.2.99")
		require.Equal(t, []netip.Addr{ma("192.0.2.98")}, defaultRouteNexthops(t, h, v4, 100, unix.RTPROT_BOOT))
	}

	var logs testutil.SyncBuffer
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(&logs, &testWriter{t: t}), nil))
	// As the proxy starts it: keeping its own leftovers until the first
	// Apply.
	dp := newDP(t, ns, Options{AdoptLeftovers: true, Logger: logger})
	require.Regexp(t, `msg="Meridio leftovers removed" .*kind=rule .*count=3 prefixes=`, logs.String())
	require.Regexp(t, `msg="Meridio leftovers removed" .*kind=route .*count=2 routes=`, logs.String())
	require.Nil(t, defaultRouteNexthops(t, h, v4, 1, unix.RTPROT_BOOT))
	require.Nil(t, defaultRouteNexthops(t, h, v6, 1, unix.RTPROT_BOOT))
	foreign()

	s := State{
		BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24"), mp("fd00:cafe::1/64")},
		Ports:       portsOf(ns.LinkIndex(t, "p1")),
		Nexthops:    append(append([]netip.Addr{}, nhs4...), nhs6...),
		VIPs:        vips,
	}
	require.NoError(t, dp.Apply(s))
	require.ElementsMatch(t, vips, rulesOf(t, h, 1, ProtocolCauseway))
	for _, v := range vips {
		n := 1
		if v == mp("20.0.0.2/32") {
			n = 2 // ours and the other owner's (proto static)
		}
		require.Len(t, rulesFor(t, h, 1, v), n, "rules from %s", v)
	}
	require.ElementsMatch(t, nhs4, defaultRouteNexthops(t, h, v4, 1, ProtocolCauseway))
	require.ElementsMatch(t, nhs6, defaultRouteNexthops(t, h, v6, 1, ProtocolCauseway))
	foreign()

	// A VIP removed later leaves no rule of Meridio's nor ours.
	s.VIPs = vips[1:]
	require.NoError(t, dp.Apply(s))
	require.Empty(t, rulesFor(t, h, 1, vips[0]))
	require.ElementsMatch(t, vips[1:], rulesOf(t, h, 1, ProtocolCauseway))
	foreign()

	// A restart finds nothing of Meridio's any more and takes nothing of
	// the other owners.
	require.NoError(t, dp.Close())
	logs2 := &testutil.SyncBuffer{}
	dp2 := newDP(t, ns, Options{AdoptLeftovers: true, Logger: slog.New(slog.NewTextHandler(logs2, nil))})
	require.NoError(t, dp2.Apply(s))
	require.NotContains(t, logs2.String(), "Meridio")
	require.ElementsMatch(t, vips[1:], rulesOf(t, h, 1, ProtocolCauseway))
	foreign()
}
