package main

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/testutil"
)

// Readers of the kernel state of a namespace, through netlink handles bound
// to it.

func nlHandle(t testing.TB, ns *testutil.NetNS) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(ns.Handle)
	require.NoError(t, err)
	return h
}

// links returns the namespace's links. A dump that links changed under
// (the proxy adding ports meanwhile) is read again: the kernel says so
// with ErrDumpInterrupted rather than give a consistent list.
func links(t testing.TB, ns *testutil.NetNS) []netlink.Link {
	t.Helper()
	h := nlHandle(t, ns)
	defer h.Close()
	ls, err := h.LinkList()
	for try := 0; errors.Is(err, netlink.ErrDumpInterrupted) && try < 100; try++ {
		ls, err = h.LinkList()
	}
	require.NoError(t, err)
	return ls
}

// vethsIn returns the namespace's veth links.
func vethsIn(t testing.TB, ns *testutil.NetNS) []netlink.Link {
	t.Helper()
	var out []netlink.Link
	for _, l := range links(t, ns) {
		if l.Type() == "veth" {
			out = append(out, l)
		}
	}
	return out
}

// bridgePorts returns the links enslaved to the bridge called name, and
// whether the bridge exists.
func bridgePorts(t testing.TB, ns *testutil.NetNS, name string) ([]netlink.Link, bool) {
	t.Helper()
	all := links(t, ns)
	idx := slices.IndexFunc(all, func(l netlink.Link) bool { return l.Attrs().Name == name && l.Type() == "bridge" })
	if idx < 0 {
		return nil, false
	}
	var ports []netlink.Link
	for _, l := range all {
		if l.Attrs().MasterIndex == all[idx].Attrs().Index {
			ports = append(ports, l)
		}
	}
	return ports, true
}

// peers reports whether a (in one namespace) and b (in another) are the two
// ends of one veth pair: each names the other's index as its link.
func peers(a, b netlink.Link) bool {
	return a.Type() == "veth" && b.Type() == "veth" &&
		a.Attrs().ParentIndex == b.Attrs().Index && b.Attrs().ParentIndex == a.Attrs().Index
}

// peerIn returns the link of list that is l's veth peer.
func peerIn(l netlink.Link, list []netlink.Link) netlink.Link {
	for _, o := range list {
		if peers(l, o) {
			return o
		}
	}
	return nil
}

// globalPrefixes returns the global-scope addresses of the link called name
// (nil if the link does not exist).
func globalPrefixes(t testing.TB, ns *testutil.NetNS, name string) []netip.Prefix {
	t.Helper()
	h := nlHandle(t, ns)
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return nil
	}
	addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
	require.NoError(t, err)
	var out []netip.Prefix
	for _, a := range addrs {
		if a.Scope != int(netlink.SCOPE_UNIVERSE) {
			continue
		}
		ip, _ := netip.AddrFromSlice(a.IP)
		ones, _ := a.Mask.Size()
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

// defaultNexthops returns the gateways of the default route of family in
// table, sorted (nil when there is no such route).
func defaultNexthops(t testing.TB, ns *testutil.NetNS, table, family int) []netip.Addr {
	t.Helper()
	h := nlHandle(t, ns)
	defer h.Close()
	routes, err := h.RouteListFiltered(family, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	var out []netip.Addr
	for _, r := range routes {
		if r.Dst != nil {
			if ones, _ := r.Dst.Mask.Size(); ones != 0 {
				continue
			}
		}
		add := func(ip net.IP) {
			if a, ok := netip.AddrFromSlice(ip); ok {
				out = append(out, a.Unmap())
			}
		}
		if r.Gw != nil {
			add(r.Gw)
		}
		for _, nh := range r.MultiPath {
			add(nh.Gw)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// hasSourceRule reports whether the rule `from src lookup table` exists.
func hasSourceRule(t testing.TB, ns *testutil.NetNS, src netip.Prefix, table int) bool {
	t.Helper()
	h := nlHandle(t, ns)
	defer h.Close()
	family := netlink.FAMILY_V4
	if src.Addr().Is6() {
		family = netlink.FAMILY_V6
	}
	rules, err := h.RuleList(family)
	require.NoError(t, err)
	for _, r := range rules {
		if r.Src == nil || r.Table != table {
			continue
		}
		ip, _ := netip.AddrFromSlice(r.Src.IP)
		ones, _ := r.Src.Mask.Size()
		if netip.PrefixFrom(ip.Unmap(), ones) == src {
			return true
		}
	}
	return false
}
