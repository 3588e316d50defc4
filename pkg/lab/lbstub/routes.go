package lbstub

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// RouteProtocol marks the VIP routes of the LB stub (rtnetlink protocol).
const RouteProtocol netlink.RouteProtocol = 0xc7

// nexthop is a target address and the interface it is on-link on.
type nexthop struct {
	addr      netip.Addr
	linkIndex int
}

// onLink maps each target address to the local interface whose connected
// subnet holds it; targets not on-link (or our own addresses) are left out.
func onLink(h *netlink.Handle, targets []netip.Addr) ([]nexthop, error) {
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	type subnet struct {
		p     netip.Prefix
		index int
	}
	var subnets []subnet
	own := map[netip.Addr]bool{}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		own[ip] = true
		ones, _ := a.Mask.Size()
		if ones == ip.BitLen() || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		subnets = append(subnets, subnet{p: netip.PrefixFrom(ip, ones).Masked(), index: a.LinkIndex})
	}
	var out []nexthop
	for _, t := range targets {
		if own[t] {
			continue
		}
		for _, s := range subnets {
			if s.p.Contains(t) {
				out = append(out, nexthop{addr: t, linkIndex: s.index})
				break
			}
		}
	}
	return out, nil
}

func hostNet(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
}

func family(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// currentGateways are the gateways of the kernel's route to vip, if any.
func currentGateways(h *netlink.Handle, vip netip.Addr) ([]netip.Addr, bool, error) {
	routes, err := h.RouteListFiltered(family(vip), &netlink.Route{Dst: hostNet(vip), Table: syscall.RT_TABLE_MAIN},
		netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, false, fmt.Errorf("list routes to %s: %w", vip, err)
	}
	if len(routes) == 0 {
		return nil, false, nil
	}
	return topo.Gateways(routes), true, nil
}

// syncVIP makes the route to vip spread over the nexthops of its family, or
// removes it when there are none. It touches the kernel only on change.
func syncVIP(h *netlink.Handle, vip netip.Addr, all []nexthop) error {
	var nhs []nexthop
	for _, nh := range all {
		if nh.addr.Is4() == vip.Is4() {
			nhs = append(nhs, nh)
		}
	}
	sort.Slice(nhs, func(i, j int) bool { return nhs[i].addr.Less(nhs[j].addr) })
	want := make([]netip.Addr, 0, len(nhs))
	for _, nh := range nhs {
		want = append(want, nh.addr)
	}
	have, exists, err := currentGateways(h, vip)
	if err != nil {
		return err
	}
	if len(nhs) == 0 {
		if !exists {
			return nil
		}
		err := h.RouteDel(&netlink.Route{Dst: hostNet(vip), Protocol: RouteProtocol})
		if err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("delete route to %s: %w", vip, err)
		}
		return nil
	}
	if exists && slices.Equal(have, want) {
		return nil
	}
	route := &netlink.Route{Dst: hostNet(vip), Protocol: RouteProtocol}
	if len(nhs) == 1 {
		route.Gw = nhs[0].addr.AsSlice()
		route.LinkIndex = nhs[0].linkIndex
	} else {
		for _, nh := range nhs {
			route.MultiPath = append(route.MultiPath, &netlink.NexthopInfo{Gw: nh.addr.AsSlice(), LinkIndex: nh.linkIndex})
		}
	}
	if err := h.RouteReplace(route); err != nil {
		return fmt.Errorf("route %s via %v: %w", vip, want, err)
	}
	return nil
}

// syncRoutes brings the VIP routes of the namespace at ns in step with
// targets. It reports whether every VIP has at least one on-link target of
// its family, i.e. whether the LB can serve all its VIPs.
func syncRoutes(ns netns.NsHandle, vips, targets []netip.Addr) (bool, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return false, fmt.Errorf("netlink handle: %w", err)
	}
	defer h.Close()
	nhs, err := onLink(h, targets)
	if err != nil {
		return false, err
	}
	var errs []error
	ready := true
	for _, vip := range vips {
		errs = append(errs, syncVIP(h, vip, nhs))
		if !slices.ContainsFunc(nhs, func(nh nexthop) bool { return nh.addr.Is4() == vip.Is4() }) {
			ready = false
		}
	}
	err = errors.Join(errs...)
	return ready && err == nil, err
}

// removeRoutes deletes the VIP routes the stub made.
func removeRoutes(ns netns.NsHandle, vips []netip.Addr) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return
	}
	defer h.Close()
	for _, vip := range vips {
		_ = h.RouteDel(&netlink.Route{Dst: hostNet(vip), Protocol: RouteProtocol})
	}
}
