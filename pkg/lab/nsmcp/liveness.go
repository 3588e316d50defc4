package nsmcp

import (
	"context"
	"errors"
	"net/url"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// kernelLinkAlive is the lab clients' data-plane check for the SDK's heal:
// the connection's kernel interface still exists in its namespace. With it
// a heal that starts because the NSM control plane went away re-requests
// the connection as it is (keeping the veth and its addresses) instead of
// closing it first. Only a link or a namespace known to be gone is dead; a
// check that cannot tell says alive.
func kernelLinkAlive(_ context.Context, conn *networkservice.Connection) bool {
	km := kernelmech.ToMechanism(conn.GetMechanism())
	if km == nil || km.GetInterfaceName() == "" {
		return true
	}
	h, err := handleFor(km.GetNetNSURL())
	if err != nil {
		return !errors.Is(err, errNetNSGone)
	}
	defer h.Close()
	_, err = h.LinkByName(km.GetInterfaceName())
	var notFound netlink.LinkNotFoundError
	return !errors.As(err, &notFound)
}

var errNetNSGone = errors.New("network namespace is gone")

// handleFor opens a netlink handle in the namespace of a kernel
// mechanism's file:// URL (empty: the process's own).
func handleFor(rawURL string) (*netlink.Handle, error) {
	if rawURL == "" {
		return netlink.NewHandle()
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "file" {
		return nil, errors.New("not a file:// netns url")
	}
	ns, err := netns.GetFromPath(u.Path)
	if err != nil {
		return nil, errors.Join(errNetNSGone, err)
	}
	defer ns.Close()
	return netlink.NewHandleAt(ns)
}
