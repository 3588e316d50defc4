package topo

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/internal/netnsdo"
)

// VethEnd is one end of a veth link: the namespace it lives in (bind-mount
// path, empty for the current one), its name and its addresses.
type VethEnd struct {
	NetNSPath string
	Name      string
	Addrs     []netip.Prefix
}

func openNS(path string) (netns.NsHandle, error) {
	if path == "" {
		return netns.Get()
	}
	return netns.GetFromPath(path)
}

// AddVeth creates a veth pair directly in the two namespaces, adds the
// addresses (IPv6 without DAD) and sets both ends up.
func AddVeth(a, b VethEnd) error {
	nsA, err := openNS(a.NetNSPath)
	if err != nil {
		return fmt.Errorf("veth %s: open netns %s: %w", a.Name, a.NetNSPath, err)
	}
	defer nsA.Close()
	nsB, err := openNS(b.NetNSPath)
	if err != nil {
		return fmt.Errorf("veth %s: open netns %s: %w", b.Name, b.NetNSPath, err)
	}
	defer nsB.Close()
	h, err := netlink.NewHandleAt(nsA)
	if err != nil {
		return fmt.Errorf("veth %s: %w", a.Name, err)
	}
	defer h.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = a.Name
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: b.Name, PeerNamespace: netlink.NsFd(nsB)}); err != nil {
		return fmt.Errorf("add veth %s/%s: %w", a.Name, b.Name, err)
	}
	if err := configure(nsA, a); err != nil {
		return err
	}
	return configure(nsB, b)
}

func configure(ns netns.NsHandle, end VethEnd) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("configure %s: %w", end.Name, err)
	}
	defer h.Close()
	l, err := h.LinkByName(end.Name)
	if err != nil {
		return fmt.Errorf("configure %s: %w", end.Name, err)
	}
	for _, p := range end.Addrs {
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if p.Addr().Is6() {
			addr.Flags = nodad
		}
		if err := h.AddrReplace(l, addr); err != nil {
			return fmt.Errorf("address %s on %s: %w", p, end.Name, err)
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", end.Name, err)
	}
	return nil
}

// AddRoute adds (replaces) a route to dst via gw in the namespace at path;
// several gateways make a multipath route.
func AddRoute(path string, dst netip.Prefix, gws ...netip.Addr) error {
	h, err := netnsdo.NetlinkHandle(path)
	if err != nil {
		return fmt.Errorf("route %s: %w", dst, err)
	}
	defer h.Close()
	r := &netlink.Route{Dst: &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), dst.Addr().BitLen())}}
	switch len(gws) {
	case 0:
		return fmt.Errorf("route %s: no gateway", dst)
	case 1:
		r.Gw = gws[0].AsSlice()
	default:
		for _, gw := range gws {
			r.MultiPath = append(r.MultiPath, &netlink.NexthopInfo{Gw: gw.AsSlice()})
		}
	}
	if err := h.RouteReplace(r); err != nil {
		return fmt.Errorf("route %s via %v: %w", dst, gws, err)
	}
	return nil
}
