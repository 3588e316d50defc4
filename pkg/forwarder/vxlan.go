package forwarder

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	vxlanmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/vxlan"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"google.golang.org/grpc"

	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"

	"github.com/causeway-net/causeway/pkg/nsm/chain/netnsurl"
)

// tunnelParams are one connection's VXLAN tunnel as this node sees it.
type tunnelParams struct {
	local, remote  net.IP
	vni            uint32
	port, peerPort uint16
}

func (p tunnelParams) String() string {
	return p.local.String() + "->" + p.remote.String() + "/" + strconv.FormatUint(uint64(p.vni), 10) + ":" + strconv.FormatUint(uint64(p.port), 10)
}

// check refuses a tunnel the kernel could not carry as the peer expects.
func (p tunnelParams) check() error {
	switch {
	case p.local == nil || p.remote == nil:
		return fmt.Errorf("VXLAN mechanism without both node addresses (local %v, remote %v)", p.local, p.remote)
	case (p.local.To4() == nil) != (p.remote.To4() == nil):
		return fmt.Errorf("VXLAN node addresses of two families (local %s, remote %s)", p.local, p.remote)
	case p.vni == 0:
		return fmt.Errorf("VXLAN mechanism without a VNI")
	case p.port == 0 || (p.peerPort != 0 && p.peerPort != p.port):
		// A Linux VXLAN device sends to the port it listens on.
		return fmt.Errorf("VXLAN ports differ (here %d, peer %d)", p.port, p.peerPort)
	}
	return nil
}

// tunnel is the VXLAN device the forwarder made for one connection: its
// UDP socket in the node's namespace, the device itself in the client's (on
// the requesting node) or the endpoint's (on the serving node) namespace.
type tunnel struct {
	params tunnelParams
	ns     netns.NsHandle
	name   string
	tag    string // the device's alias: which connection it serves
	nodeNS string // where the device is made ("": the forwarder's own)
	mtu    int
	ips    []net.IP // the connection's addresses at this end
	// mac, when set, is the MAC address the device is made with: the one
	// of the earlier run's device it replaces (clearWay).
	mac net.HardwareAddr
	// held reports whether a tag is a connection this run holds (called
	// under the lock of the client's madeFor).
	held func(tag string) bool
}

// tagPrefix begins the alias of every device the forwarder makes; the
// connection id follows. A forwarder started again finds by it the devices
// an earlier run made for a connection, wherever they are named.
const tagPrefix = "causeway-forwarder/"

func (t *tunnel) key() string { return t.ns.UniqueId() + "/" + t.name + "|" + t.params.String() }

func (t *tunnel) present() bool { return matches(t) }

func (t *tunnel) adoptable() bool { return matches(t) }

// clearWay removes a device in the way under t's name, and the devices an
// earlier run made for t's connection under other names (its Close was lost
// with that run, and a reselect named the endpoint's interface anew).
func (t *tunnel) clearWay() {
	deleteVXLAN(t.ns, t.name)
	deleteTagged(t.ns, t.tag)
	t.mac = deleteEarlier(t)
}

func (t *tunnel) remove() { deleteVXLAN(t.ns, t.name) }

func (t *tunnel) close() { _ = t.ns.Close() }

func (t *tunnel) attrs() []any { return []any{"name", t.name, "tunnel", t.params.String()} }

// vxlanClient is the forwarder's client element for connections that cross
// nodes. Once the other side has answered it creates the connection's
// VXLAN device: on the requesting node (outgoing mechanism VXLAN) under
// the client's interface name in the client's namespace; on the serving
// node (incoming mechanism VXLAN, outgoing KERNEL) under the endpoint's
// interface name in the endpoint's namespace. It is idempotent across
// refreshes, adopts a matching device an earlier run made, and removes the
// device on Close.
type vxlanClient struct {
	nodeNS  string // "" for the forwarder's own namespace
	tunnels *madeFor[*tunnel]
}

func newVXLANClient(nodeNS string) *vxlanClient {
	return &vxlanClient{nodeNS: nodeNS, tunnels: newMadeFor[*tunnel]("vxlan device")}
}

func (v *vxlanClient) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	conn, err := next.Client(ctx).Request(ctx, request, opts...)
	if err != nil {
		return nil, err
	}
	where, params, ok, err := tunnelOf(ctx, conn)
	if ok && err == nil {
		err = v.ensure(conn.GetId(), where, params, int(conn.GetContext().GetMTU()))
	}
	if err != nil {
		closeCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		_, _ = next.Client(ctx).Close(closeCtx, conn, opts...)
		return nil, fmt.Errorf("vxlan for %s: %w", conn.GetId(), err)
	}
	return conn, nil
}

// Close removes the connection's device, unless the Close is made within a
// Request of the connection (the dial client moving it to a new URL of the
// peer's NSMgr, move.go): the device keeps carrying the connection's traffic
// until the Request that follows takes it over, or replaces it if the path
// moved, or a Close from outside a Request removes it.
func (v *vxlanClient) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*empty.Empty, error) {
	if closeWithinRequest(ctx) {
		if t, ok := v.tunnels.get(conn.GetId()); ok {
			slog.Info("vxlan device kept: the connection moves to a new URL",
				append([]any{"conn", conn.GetId()}, t.attrs()...)...)
		}
	} else {
		v.remove(conn.GetId())
	}
	return next.Client(ctx).Close(ctx, conn, opts...)
}

// tunnelOf says where the connection's VXLAN device goes and what it
// carries; ok is false for a connection of one node.
func tunnelOf(ctx context.Context, conn *networkservice.Connection) (where end, params tunnelParams, ok bool, err error) {
	if out := vxlanmech.ToMechanism(conn.GetMechanism()); out != nil {
		nsc, found := loadNSCEnd(ctx)
		if !found {
			return end{}, tunnelParams{}, true, fmt.Errorf("VXLAN toward another node needs a KERNEL client side")
		}
		nsc.ips = parseIPs(conn.GetContext().GetIpContext().GetSrcIpAddrs())
		return nsc, tunnelParams{local: out.SrcIP(), remote: out.DstIP(), vni: out.VNI(), port: out.SrcPort(), peerPort: out.DstPort()}, true, nil
	}
	in, found := loadNSCTunnel(ctx)
	if !found {
		return end{}, tunnelParams{}, false, nil
	}
	nse := kernelmech.ToMechanism(conn.GetMechanism())
	if nse == nil {
		return end{}, tunnelParams{}, true, fmt.Errorf("VXLAN from another node needs a KERNEL endpoint side, got %q", conn.GetMechanism().GetType())
	}
	// On this node the VNI the vni server chose is the one in the stash.
	ips := parseIPs(conn.GetContext().GetIpContext().GetDstIpAddrs())
	return end{netnsURL: nse.GetNetNSURL(), name: nse.GetInterfaceName(), ips: ips}, in, true, nil
}

// ensure makes sure the device of connID is where and as params say.
func (v *vxlanClient) ensure(connID string, where end, params tunnelParams, mtu int) error {
	if err := params.check(); err != nil {
		return err
	}
	if where.name == "" {
		return fmt.Errorf("kernel mechanism without interface name")
	}
	ns, err := netnsurl.Open(where.netnsURL)
	if err != nil {
		return fmt.Errorf("device namespace: %w", err)
	}
	t := &tunnel{
		params: params, ns: ns, name: where.name, tag: tagPrefix + connID, nodeNS: v.nodeNS, mtu: mtu,
		ips: where.ips, held: v.heldLocked,
	}
	v.supersede(connID, t)
	return v.tunnels.ensure(connID, t)
}

// supersede removes the devices of this run's other connections that carry
// one of t's addresses toward t's peer, in the namespace t's device goes
// to. The peer asks for those addresses on a new connection, so the old
// connection's other end is gone (its node cut off and booted again, its
// pod replaced) though its Close never came: left in place until the old
// connection expires (minutes), its device would hold the same addresses
// and take the new connection's traffic into a tunnel nobody listens to.
func (v *vxlanClient) supersede(connID string, t *tunnel) {
	v.tunnels.mu.Lock()
	var stale []string
	for id, have := range v.tunnels.byConn {
		if id != connID && have.samePeer(t) && slices.ContainsFunc(have.ips, func(ip net.IP) bool {
			return slices.ContainsFunc(t.ips, ip.Equal)
		}) {
			stale = append(stale, id)
		}
	}
	v.tunnels.mu.Unlock()
	for _, id := range stale {
		slog.Info("vxlan device of a connection superseded by another of its addresses deleted", append([]any{"conn", id, "by", connID}, t.attrs()...)...)
		v.tunnels.remove(id)
	}
}

// samePeer reports whether o's device goes to t's namespace and tunnels
// between t's node addresses and port.
func (t *tunnel) samePeer(o *tunnel) bool {
	return t.ns.UniqueId() == o.ns.UniqueId() && t.params.local.Equal(o.params.local) &&
		t.params.remote.Equal(o.params.remote) && t.params.port == o.params.port
}

// heldLocked reports whether this run holds the connection tag names; the
// caller holds the lock of v.tunnels.
func (v *vxlanClient) heldLocked(tag string) bool {
	connID, ok := strings.CutPrefix(tag, tagPrefix)
	if !ok {
		return false
	}
	_, held := v.tunnels.byConn[connID]
	return held
}

// remove deletes the device of connID, if any.
func (v *vxlanClient) remove(connID string) { v.tunnels.remove(connID) }

// create adds the device from the node's namespace, which keeps its UDP
// socket, directly into the target namespace under its final name, and
// sets it up.
func (t *tunnel) create() error {
	node, err := openNodeNS(t.nodeNS)
	if err != nil {
		return err
	}
	defer node.Close()
	h, err := netlink.NewHandleAt(node)
	if err != nil {
		return fmt.Errorf("netlink handle in the node namespace: %w", err)
	}
	defer h.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = t.name
	attrs.Namespace = netlink.NsFd(t.ns)
	attrs.MTU = t.mtu
	attrs.HardwareAddr = t.mac
	if attrs.MTU <= 0 {
		// The connection says none: what the node network carries. The
		// kernel's default for a device without a lower one is 1500,
		// which the node network can only carry in fragments.
		attrs.MTU = underlayMTU(h, t.params)
	}
	dev := &netlink.Vxlan{
		LinkAttrs: attrs,
		VxlanId:   int(t.params.vni),
		SrcAddr:   t.params.local,
		Group:     t.params.remote, // unicast: the one peer of the tunnel
		Port:      int(t.params.port),
		Learning:  false,
	}
	if err := h.LinkAdd(dev); err != nil {
		return fmt.Errorf("add vxlan %s (%s): %w", t.name, t.params, err)
	}
	if err := setUp(t.ns, t.name, t.tag); err != nil {
		deleteVXLAN(t.ns, t.name)
		return err
	}
	return nil
}

// Bytes a VXLAN packet adds to the inner frame: outer IP, UDP, VXLAN and
// the inner Ethernet header.
const (
	vxlanOverhead4 = 20 + 8 + 8 + 14
	vxlanOverhead6 = 40 + 8 + 8 + 14
)

// underlayMTU is the MTU of the node's link toward the tunnel's remote, less
// the VXLAN overhead; 0 (the kernel's default) when the route is unknown.
func underlayMTU(h *netlink.Handle, p tunnelParams) int {
	routes, err := h.RouteGet(p.remote)
	if err != nil || len(routes) == 0 {
		return 0
	}
	l, err := h.LinkByIndex(routes[0].LinkIndex)
	if err != nil {
		return 0
	}
	if p.remote.To4() != nil {
		return l.Attrs().MTU - vxlanOverhead4
	}
	return l.Attrs().MTU - vxlanOverhead6
}

func openNodeNS(path string) (netns.NsHandle, error) {
	if path == "" {
		ns, err := netns.Get()
		if err != nil {
			return netns.None(), fmt.Errorf("own namespace: %w", err)
		}
		return ns, nil
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return netns.None(), fmt.Errorf("node namespace %s: %w", path, err)
	}
	return ns, nil
}

// matches reports whether t's device exists, is up and carries t's tunnel.
func matches(t *tunnel) bool {
	l, err := linkIn(t.ns, t.name)
	if err != nil {
		return false
	}
	dev, ok := l.(*netlink.Vxlan)
	return ok && l.Attrs().Flags&net.FlagUp != 0 && l.Attrs().Alias == t.tag &&
		uint32(dev.VxlanId) == t.params.vni && dev.Port == int(t.params.port) &&
		dev.SrcAddr.Equal(t.params.local) && dev.Group.Equal(t.params.remote)
}

// deleteTagged removes the VXLAN devices in ns whose alias is tag.
func deleteTagged(ns netns.NsHandle, tag string) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		slog.Warn("list links for leftover vxlan devices", "error", err)
		return
	}
	for _, l := range links {
		if _, ok := l.(*netlink.Vxlan); ok && l.Attrs().Alias == tag {
			if err := h.LinkDel(l); err != nil {
				slog.Warn("delete leftover vxlan", "name", l.Attrs().Name, "error", err)
				continue
			}
			slog.Info("leftover vxlan device of an earlier forwarder run deleted", "name", l.Attrs().Name, "tag", tag)
		}
	}
}

// deleteVXLAN removes the VXLAN device called name in ns, if there is one.
// Links of other kinds are left alone.
func deleteVXLAN(ns netns.NsHandle, name string) {
	l, err := linkIn(ns, name)
	if err != nil {
		return
	}
	if _, ok := l.(*netlink.Vxlan); !ok {
		slog.Warn("not deleting non-vxlan link in the way of a vxlan device", "name", name, "type", l.Type())
		return
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return
	}
	defer h.Close()
	if err := h.LinkDel(l); err != nil {
		slog.Warn("delete vxlan", "name", name, "error", err)
	}
}
