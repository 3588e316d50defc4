package proxyd

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/pkg/proxy"
)

// targetLinks are the indexes of the targets' interfaces (bridge ports).
func targetLinks(p *proxy.Proxy) []int {
	var out []int
	for _, i := range p.Snapshot().Interfaces {
		if i.Type == proxy.TargetConn {
			out = append(out, i.Index)
		}
	}
	return out
}

// setHairpin turns hairpin mode on for the bridge ports links of ns (0:
// the daemon's own): with the nftables provider, a flow that a target sends
// to a service and that the round robin gives back to that target leaves
// the bridge by the port it came in, which a bridge refuses otherwise.
// The service load balancer owns this flag of the target ports. It reports
// whether some link is not a bridge port yet (to be set again later).
func setHairpin(ns netns.NsHandle, links []int) (pending bool, err error) {
	var h *netlink.Handle
	if ns > 0 {
		h, err = netlink.NewHandleAt(ns)
	} else {
		h, err = netlink.NewHandle()
	}
	if err != nil {
		return false, fmt.Errorf("netlink handle: %w", err)
	}
	defer h.Close()
	for _, idx := range links {
		l, err := h.LinkByIndex(idx)
		if err != nil {
			continue // gone: the proxy forgets it too
		}
		if l.Attrs().MasterIndex == 0 {
			pending = true // the dataplane has not made it a bridge port yet
			continue
		}
		if err := h.LinkSetHairpin(l, true); err != nil {
			return false, fmt.Errorf("hairpin on %s: %w", l.Attrs().Name, err)
		}
	}
	return pending, nil
}
