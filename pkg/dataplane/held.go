package dataplane

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
)

// delLink deletes a link (a variable so that tests can make it fail).
var delLink = (*netlink.Handle).LinkDel

// addrLinks maps the addresses that the ports held since New
// (Options.HoldLeftovers) carried then to their ports: a connection that
// comes back on a new link with one of those addresses supersedes the held
// port that had it.
type addrLinks map[netip.Addr]int

// readLeftoverAddrsLocked records the addresses of the held ports (one
// address dump, at start).
func (dp *Dataplane) readLeftoverAddrsLocked() error {
	dp.leftoverAddrs = addrLinks{}
	if dp.leftovers == nil || len(dp.leftovers.ports) == 0 {
		return nil
	}
	dp.read()
	addrs, err := dp.h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("list the addresses of the held ports: %w", err)
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || ip.IsLinkLocalUnicast() {
			continue
		}
		if _, held := slices.BinarySearch(dp.leftovers.ports, a.LinkIndex); held {
			dp.leftoverAddrs[ip.Unmap()] = a.LinkIndex
		}
	}
	return nil
}

// supersedeLeftoversLocked deletes the held ports (see
// Options.HoldLeftovers) that carried one of the claimed addresses, other
// than the claiming port: a connection of the earlier run came back on a
// new link with its addresses, and its old link (which no forwarder of
// this run knows) would hold them twice. A link that cannot be deleted
// stays held (logged). Without a hold it does nothing.
func (dp *Dataplane) supersedeLeftoversLocked(ports []Port) {
	if len(dp.leftoverAddrs) == 0 {
		return
	}
	for _, c := range ports {
		var gone []int
		for _, a := range c.Claims {
			old, ok := dp.leftoverAddrs[a.Unmap()]
			if !ok || old == c.Index {
				continue
			}
			if err := dp.deleteLeftoverLocked(old); err != nil {
				dp.log.Warn("held link of an earlier run not superseded", "link", old, "by", c.Index, "error", err)
				continue
			}
			gone = append(gone, old)
		}
		if len(gone) > 0 {
			dp.log.Info("held links of an earlier run superseded", "links", gone, "by", c.Index)
		}
	}
}

// deleteLeftoverLocked deletes held port idx and stops holding it. If the
// link cannot be deleted, it stays held (with its addresses), for a later
// claim (Port.Claims) or State.ReleaseLeftovers to delete.
func (dp *Dataplane) deleteLeftoverLocked(idx int) error {
	link, err := dp.h.LinkByIndex(idx)
	switch {
	case linkGone(err):
	case err != nil:
		return fmt.Errorf("get held link %d: %w", idx, err)
	default:
		err = dp.write(opLinkDel, dp.portObject(idx), func() error { return delLink(dp.h, link) })
		if err != nil && !linkGone(err) {
			return err
		}
	}
	for a, p := range dp.leftoverAddrs {
		if p == idx {
			delete(dp.leftoverAddrs, a)
		}
	}
	if dp.leftovers != nil {
		if i, ok := slices.BinarySearch(dp.leftovers.ports, idx); ok {
			h := *dp.leftovers
			h.ports = slices.Delete(slices.Clone(h.ports), i, i+1)
			dp.leftovers = &h
		}
	}
	return nil
}

// unclaimedLeftoversLocked are the held ports that goal does not have.
func (dp *Dataplane) unclaimedLeftoversLocked(goal *spec) []int {
	if dp.leftovers == nil {
		return nil
	}
	var out []int
	for _, p := range dp.leftovers.ports {
		if !goal.hasPort(p) {
			out = append(out, p)
		}
	}
	return out
}
