package forwarder

import (
	"log/slog"
	"net"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
)

// deleteEarlier removes, from the namespace t's device goes to, the VXLAN
// devices an earlier forwarder run made for t's connection under another
// connection id: a forwarder of another name (a replaced pod) heals the
// connection on a path segment of its own, so neither the name nor the tag
// of the earlier device is t's. Such a device is one this node made (t's
// local address and port) that no connection of this run holds and that
// holds t's VNI (the kernel refuses a second device of one VNI and port
// from one namespace) or carries one of the connection's addresses toward
// t's peer (left in place, it would take the connection's traffic into a
// tunnel its peer has replaced).
//
// It returns the MAC address of the device it deleted, so that the one made
// in its place keeps it: the connection's peers (the bridge's ports and
// neighbours beyond the tunnel) keep sending to that address, and a new one
// would lose their frames until each neighbour entry is resolved again
// (tens of seconds). nil when it deleted none.
//
// A forwarder in a pod network of its own never met these: the kernel
// deleted its devices with its pod's namespace. On the node's network,
// where its tunnels' sockets must live to outlast it, they stay.
func deleteEarlier(t *tunnel) net.HardwareAddr {
	h, err := netlink.NewHandleAt(t.ns)
	if err != nil {
		return nil
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		slog.Warn("list links for an earlier run's vxlan devices", "error", err)
		return nil
	}
	var mac net.HardwareAddr
	for _, l := range links {
		dev, ok := l.(*netlink.Vxlan)
		if !ok || !t.earlier(h, dev) {
			continue
		}
		if err := h.LinkDel(l); err != nil {
			slog.Warn("delete an earlier run's vxlan device", "name", l.Attrs().Name, "error", err)
			continue
		}
		slog.Info("vxlan device of an earlier forwarder run deleted", append([]any{"old", l.Attrs().Name, "oldTag", l.Attrs().Alias, "mac", l.Attrs().HardwareAddr.String()}, t.attrs()...)...)
		mac = l.Attrs().HardwareAddr
	}
	return mac
}

// earlier reports whether dev is an earlier run's device of t's connection.
func (t *tunnel) earlier(h *netlink.Handle, dev *netlink.Vxlan) bool {
	alias := dev.Attrs().Alias
	if !strings.HasPrefix(alias, tagPrefix) || alias == t.tag || (t.held != nil && t.held(alias)) {
		return false
	}
	if !dev.SrcAddr.Equal(t.params.local) || dev.Port != int(t.params.port) {
		return false
	}
	if uint32(dev.VxlanId) == t.params.vni {
		return true
	}
	return dev.Group.Equal(t.params.remote) && carriesAny(h, dev, t.ips)
}

// carriesAny reports whether dev holds one of ips.
func carriesAny(h *netlink.Handle, dev netlink.Link, ips []net.IP) bool {
	if len(ips) == 0 {
		return false
	}
	addrs, err := h.AddrList(dev, netlink.FAMILY_ALL)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(addrs, func(a netlink.Addr) bool {
		return slices.ContainsFunc(ips, a.IP.Equal)
	})
}

// parseIPs reads a connection's addresses (CIDRs, or bare addresses).
func parseIPs(raw []string) []net.IP {
	var out []net.IP
	for _, s := range raw {
		if ip, _, err := net.ParseCIDR(s); err == nil {
			out = append(out, ip)
		} else if ip := net.ParseIP(s); ip != nil {
			out = append(out, ip)
		}
	}
	return out
}
