package dataplane

import (
	"errors"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
)

// movedNexthops lists the nexthops tied to a port (Port.Nexthops) whose
// port is new or differs from the previous Apply's. A load balancer that
// comes back keeps its address but gets a new interface and MAC; a
// neighbour entry left from its previous life would send the proxy's
// traffic to the old MAC (flooded by the bridge and dropped by everyone)
// until the kernel's reachability probes time out, which for IPv6 took
// minutes in the lab.
func movedNexthops(prev, next *spec) []netip.Addr {
	var out []netip.Addr
	for a, idx := range next.nexthopPorts {
		if prev != nil {
			if old, ok := prev.nexthopPorts[a]; ok && old == idx {
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

// forgetNeighborsLocked deletes the bridge's dynamic neighbour entries of
// addrs, so that the next packet resolves them again. Permanent entries
// (set by an administrator) stay. Failures are logged: a stale entry only
// delays traffic until the kernel re-resolves it.
func (dp *Dataplane) forgetNeighborsLocked(addrs []netip.Addr) {
	if len(addrs) == 0 || dp.m.bridgeIndex == 0 {
		return
	}
	moved := make(map[netip.Addr]struct{}, len(addrs))
	for _, a := range addrs {
		moved[a] = struct{}{}
	}
	dp.read()
	neighs, err := dp.h.NeighList(dp.m.bridgeIndex, netlink.FAMILY_ALL)
	if err != nil {
		dp.log.Warn("list neighbours of moved nexthops", "error", err)
		return
	}
	for i := range neighs {
		n := &neighs[i]
		a, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		if _, ok := moved[a.Unmap()]; !ok || n.State&netlink.NUD_PERMANENT != 0 {
			continue
		}
		if err := dp.h.NeighDel(n); err != nil && !errors.Is(err, syscall.ENOENT) {
			dp.log.Warn("forget neighbour of moved nexthop", "nexthop", a, "error", err)
			continue
		}
		dp.ctr.neighForgotten.Add(1)
		dp.log.Debug("forgot neighbour entry of a nexthop on a new port", "nexthop", a, "mac", n.HardwareAddr.String())
	}
}
