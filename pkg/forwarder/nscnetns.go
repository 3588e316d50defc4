package forwarder

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sync"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/vishvananda/netns"

	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"

	"github.com/causeway-net/causeway/pkg/nsm/chain/netnsurl"
)

// The NSC's end of a connection is programmed by sdk-kernel's
// connectioncontextkernel in the NSC's namespace, which the kernel
// mechanism names by an inode:// URL that the SDK's recvfd turns into the
// file of a descriptor the NSC passed. recvfd keeps those files per
// connection only while the connection's Requests succeed: a Request that
// fails (a heal re-requesting toward an endpoint that is gone) makes it
// close them, and a Close that comes with no descriptor (the reaper's,
// started by the forwarder itself) then reaches connectioncontextkernel
// with the inode:// URL, which it cannot open. Its policy-route element
// then keeps the connection's tables as if they were still in the kernel,
// while the veth (and the tables' routes with it) goes; the connection's
// next Request (the NSC's reselect keeps the forwarder's connection id)
// finds its policies "already made" and makes no rule and no route: a
// target whose proxy's pod was replaced came back with its VIPs' rules
// pointing at an empty table, and answered nothing.
//
// nscNetNS holds, for each connection, a handle of the NSC's namespace
// taken at its last successful Request, and hands it to the rest of the
// chain on a Close whose NSC mechanism still names the namespace by its
// inode; it drops the handle after the Close.
type nscNetNS struct {
	mu      sync.Mutex
	handles map[string]netns.NsHandle // connection id → the NSC's namespace
}

func newNSCNetNS() *nscNetNS { return &nscNetNS{handles: make(map[string]netns.NsHandle)} }

func (s *nscNetNS) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	conn, err := next.Server(ctx).Request(ctx, request)
	if err != nil {
		return nil, err
	}
	// A handle of an earlier Request must not outlive a namespace that
	// this one could not open: a later Close would reach the old one.
	h, ok := openNSC(conn)
	if !ok {
		if old, had := s.take(conn.GetId()); had {
			_ = old.Close()
		}
		return conn, nil
	}
	s.keep(conn.GetId(), h)
	return conn, nil
}

// openNSC opens the NSC's namespace that conn's kernel mechanism names.
func openNSC(conn *networkservice.Connection) (netns.NsHandle, bool) {
	km := kernelmech.ToMechanism(conn.GetMechanism())
	if km == nil {
		return 0, false
	}
	h, err := netnsurl.Open(km.GetNetNSURL())
	return h, err == nil
}

func (s *nscNetNS) Close(ctx context.Context, conn *networkservice.Connection) (*empty.Empty, error) {
	h, ok := s.take(conn.GetId())
	if !ok {
		return next.Server(ctx).Close(ctx, conn)
	}
	defer h.Close()
	km := kernelmech.ToMechanism(conn.GetMechanism())
	if km == nil || !isInodeURL(km.GetNetNSURL()) {
		return next.Server(ctx).Close(ctx, conn)
	}
	inode := km.GetNetNSURL()
	km.SetNetNSURL(handleURL(h))
	slog.Debug("NSC namespace handed to the Close from the handle of the last Request", "conn", conn.GetId(), "netns", inode)
	defer km.SetNetNSURL(inode)
	return next.Server(ctx).Close(ctx, conn)
}

// keep records h for id, closing the handle it replaces.
func (s *nscNetNS) keep(id string, h netns.NsHandle) {
	s.mu.Lock()
	old, ok := s.handles[id]
	s.handles[id] = h
	s.mu.Unlock()
	if ok {
		_ = old.Close()
	}
}

// take removes and returns the handle of id.
func (s *nscNetNS) take(id string) (netns.NsHandle, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.handles[id]
	delete(s.handles, id)
	return h, ok
}

func isInodeURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == "inode"
}

// handleURL is a file:// URL of the namespace h, valid in this process
// while h is open.
func handleURL(h netns.NsHandle) string { return fmt.Sprintf("file:///proc/self/fd/%d", int(h)) }
