package netnsdo

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// NetlinkHandle opens a netlink handle whose sockets live in the namespace
// bound at path (the caller's when empty); no thread switches namespace.
// The caller closes it.
func NetlinkHandle(path string) (*netlink.Handle, error) {
	if path == "" {
		h, err := netlink.NewHandle()
		if err != nil {
			return nil, fmt.Errorf("netlink handle: %w", err)
		}
		return h, nil
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink handle in %s: %w", path, err)
	}
	return h, nil
}

// WithNetlink runs fn with a netlink handle of the namespace bound at path
// (see NetlinkHandle) and closes the handle afterwards.
func WithNetlink(path string, fn func(*netlink.Handle) error) error {
	h, err := NetlinkHandle(path)
	if err != nil {
		return err
	}
	defer h.Close()
	return fn(h)
}
