package forwarder

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/pkg/nsm/chain/netnsurl"
	"google.golang.org/grpc"

	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
)

// pair is a veth pair the forwarder made for one connection. It keeps both
// namespaces open so that Close can remove the pair whatever happened to the
// file descriptors the NSM peers passed.
type pair struct {
	nscNS, nseNS     netns.NsHandle
	nscName, nseName string
	mtu              int
}

// key identifies where and how the pair is placed: when it changes (a heal
// toward another NSE), the old pair is replaced.
func (p *pair) key() string {
	return p.nscNS.UniqueId() + "/" + p.nscName + "|" + p.nseNS.UniqueId() + "/" + p.nseName
}

func (p *pair) close() {
	_ = p.nscNS.Close()
	_ = p.nseNS.Close()
}

func (p *pair) present() bool {
	return linkExists(p.nscNS, p.nscName) && linkExists(p.nseNS, p.nseName)
}

func (p *pair) adoptable() bool { return peers(p) }

func (p *pair) clearWay() { p.remove() }

func (p *pair) create() error { return createPair(p, p.mtu) }

func (p *pair) remove() {
	deleteLink(p.nscNS, p.nscName)
	deleteLink(p.nseNS, p.nseName)
}

func (p *pair) attrs() []any { return []any{"nsc", p.nscName, "nse", p.nseName} }

// vethClient is the forwarder's client element that creates, after the NSE
// has answered, a veth pair between the NSC's and the NSE's namespaces. It is
// idempotent across refreshes and removes the pair on Close, except when the
// Close only moves the connection to a new URL of its endpoint (move.go).
type vethClient struct {
	pairs *madeFor[*pair]
}

func newVethClient() *vethClient {
	return &vethClient{pairs: newMadeFor[*pair]("veth pair")}
}

func (v *vethClient) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	v.askKeptName(request.GetConnection().GetId(), request)
	conn, err := next.Client(ctx).Request(ctx, request, opts...)
	if err != nil {
		return nil, err
	}
	nse := kernelmech.ToMechanism(conn.GetMechanism())
	nsc, ok := loadNSCEnd(ctx)
	if nse == nil || !ok {
		return conn, nil
	}
	err = v.ensure(conn.GetId(), nsc, end{netnsURL: nse.GetNetNSURL(), name: nse.GetInterfaceName()}, int(conn.GetContext().GetMTU()))
	if err != nil {
		closeCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		_, _ = next.Client(ctx).Close(closeCtx, conn, opts...)
		return nil, err
	}
	return conn, nil
}

func (v *vethClient) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*empty.Empty, error) {
	if !v.keepOnMove(ctx, conn.GetId()) {
		v.remove(conn.GetId())
	}
	return next.Client(ctx).Close(ctx, conn, opts...)
}

// ensure makes sure the pair for connID joins nsc and nse.
func (v *vethClient) ensure(connID string, nsc, nse end, mtu int) error {
	if nsc.name == "" || nse.name == "" {
		return fmt.Errorf("veth for %s: kernel mechanism without interface name (nsc %q, nse %q)", connID, nsc.name, nse.name)
	}
	nscNS, err := netnsurl.Open(nsc.netnsURL)
	if err != nil {
		return fmt.Errorf("veth for %s: nsc side: %w", connID, err)
	}
	nseNS, err := netnsurl.Open(nse.netnsURL)
	if err != nil {
		_ = nscNS.Close()
		return fmt.Errorf("veth for %s: nse side: %w", connID, err)
	}
	want := &pair{nscNS: nscNS, nseNS: nseNS, nscName: nsc.name, nseName: nse.name, mtu: mtu}
	if err := v.pairs.ensure(connID, want); err != nil {
		return fmt.Errorf("veth for %s: %w", connID, err)
	}
	return nil
}

// remove deletes the pair of connID, if any.
func (v *vethClient) remove(connID string) { v.pairs.remove(connID) }

// createPair creates the veth directly inside the two namespaces with their
// final names, so nothing is ever visible in the forwarder's namespace.
func createPair(p *pair, mtu int) error {
	h, err := netlink.NewHandleAt(p.nscNS)
	if err != nil {
		return fmt.Errorf("netlink handle in nsc netns: %w", err)
	}
	defer h.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = p.nscName
	if mtu > 0 {
		attrs.MTU = mtu
	}
	veth := &netlink.Veth{LinkAttrs: attrs, PeerName: p.nseName, PeerNamespace: netlink.NsFd(p.nseNS)}
	if mtu > 0 {
		veth.PeerMTU = uint32(mtu)
	}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s/%s: %w", p.nscName, p.nseName, err)
	}
	if err := setUp(p.nscNS, p.nscName, ""); err != nil {
		return err
	}
	return setUp(p.nseNS, p.nseName, "")
}

// setUp sets the link called name in ns up, with alias as its alias when
// that is not empty.
func setUp(ns netns.NsHandle, name, alias string) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink handle: %w", err)
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("find %s: %w", name, err)
	}
	if alias != "" {
		if err := h.LinkSetAlias(l, alias); err != nil {
			return fmt.Errorf("set alias of %s: %w", name, err)
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	return nil
}

// peers reports whether p's two ends exist, are up, and are the two ends
// of one veth.
func peers(p *pair) bool {
	nsc, err := linkIn(p.nscNS, p.nscName)
	if err != nil {
		return false
	}
	nse, err := linkIn(p.nseNS, p.nseName)
	if err != nil {
		return false
	}
	_, ok := nsc.(*netlink.Veth)
	up := nsc.Attrs().Flags&net.FlagUp != 0 && nse.Attrs().Flags&net.FlagUp != 0
	// A veth's IFLA_LINK is its peer's index (in the peer's namespace).
	return ok && up && nsc.Attrs().ParentIndex == nse.Attrs().Index && nse.Attrs().ParentIndex == nsc.Attrs().Index
}

func linkIn(ns netns.NsHandle, name string) (netlink.Link, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return h.LinkByName(name)
}

func linkExists(ns netns.NsHandle, name string) bool {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return false
	}
	defer h.Close()
	_, err = h.LinkByName(name)
	return err == nil
}

// deleteLink removes the veth called name in ns, if there is one. Links of
// other kinds are left alone.
func deleteLink(ns netns.NsHandle, name string) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return
	}
	if _, ok := l.(*netlink.Veth); !ok {
		slog.Warn("not deleting non-veth link in the way of a veth", "name", name, "type", l.Type())
		return
	}
	if err := h.LinkDel(l); err != nil {
		slog.Warn("delete veth", "name", name, "error", err)
	}
}
