package proxy

import (
	"net/netip"
	"slices"

	"github.com/causeway-net/causeway/pkg/dataplane"
)

// InterfaceCreated records the kernel link of a connection (i.ConnKey names
// it, see ConnKey): the link becomes a bridge port, and for an LB
// connection the LB's addresses the proxy allocated ("-src") become ECMP
// nexthops tied to it. Nothing but the link comes from the event: the
// addresses are the proxy's own allocation records, and a refresh that
// changes them moves the nexthops (SetIPContext). A second create for the
// same connection replaces the first (a heal may move it to another link),
// and the next Apply deletes the first link if still there (State.Remove)
// and the links an earlier run left with the connection's addresses (the
// port's Claims): the link enters the dataplane only there. A link
// announced for another connection is taken from it. A link may be
// announced before the connection's addresses are known: it is a port at
// once, and gets its nexthops when they are. The dataplane ignores ports
// whose link no longer exists.
func (p *Proxy) InterfaceCreated(i Interface) {
	log := p.log.With("index", i.Index, "name", i.Name, "type", i.Type.String(), "connKey", i.ConnKey)
	if i.Index <= 0 || i.ConnKey == "" || (i.Type != TargetConn && i.Type != LBConn) {
		log.Warn("interface create ignored: no index, no connection or unknown type")
		return
	}
	p.mu.Lock()
	st := p.conns[i.ConnKey]
	if st != nil && st.link == i.Index {
		p.mu.Unlock()
		log.Debug("interface create repeated")
		return
	}
	if other, ok := p.links[i.Index]; ok {
		p.unlinkLocked(p.conns[other])
		p.dropIdleLocked(p.conns[other])
	}
	if st == nil {
		st = &connState{id: i.ConnKey, typ: i.Type, allocs: map[childKey]netip.Prefix{}}
		p.conns[i.ConnKey] = st
	}
	replaced, replacedName := st.link, st.linkName
	p.unlinkLocked(st)
	st.link, st.linkName = i.Index, i.Name
	p.links[i.Index] = st.id
	p.portsHops.addPort(i.Index, i.Type == TargetConn, allocAddrs(st), p.portFilterLocked(st))
	p.refreshHopsLocked(st)
	p.removals.retire(replaced, replacedName)
	hops := slices.Clone(st.hops)
	p.mu.Unlock()
	log.Info("interface added", "nexthops", hops, "replaced", replaced)
	p.markDirty()
}

// allocAddrs are the addresses of st's allocations, sorted. p.mu must be
// held.
func allocAddrs(st *connState) []netip.Addr {
	out := make([]netip.Addr, 0, len(st.allocs))
	for _, a := range st.allocs {
		out = append(out, a.Addr().Unmap())
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// InterfaceDeleted removes a connection's port and nexthops. The connection
// is the one whose link is i.Index (the kernel's delete knows that), whatever
// i.ConnKey says. Deleting an unknown link is a no-op.
func (p *Proxy) InterfaceDeleted(i Interface) {
	if i.Index <= 0 {
		p.log.Warn("interface delete ignored: no index", "name", i.Name, "connKey", i.ConnKey)
		return
	}
	p.mu.Lock()
	id, had := p.links[i.Index]
	var hops []netip.Addr
	var typ ConnType
	if had {
		st := p.conns[id]
		hops, typ = st.hops, st.typ
		p.unlinkLocked(st)
		p.dropIdleLocked(st)
	}
	p.mu.Unlock()
	if !had {
		p.log.Debug("interface delete of an unknown interface", "index", i.Index, "name", i.Name)
		return
	}
	p.log.Info("interface removed", "index", i.Index, "name", i.Name, "type", typ.String(), "connID", id, "nexthops", hops)
	p.markDirty()
}

// unlinkLocked withdraws the port and nexthops of st's link, if it has one.
// p.mu must be held.
func (p *Proxy) unlinkLocked(st *connState) {
	if st == nil || st.link == 0 {
		return
	}
	for _, a := range st.hops {
		p.portsHops.removeHop(a, st.link)
	}
	p.portsHops.removePort(st.link)
	delete(p.links, st.link)
	st.lastLink, st.lastName = st.link, st.linkName
	st.link, st.linkName, st.hops = 0, "", nil
}

// dropIdleLocked forgets st if it holds nothing: no link, no address, no
// pending release. p.mu must be held.
func (p *Proxy) dropIdleLocked(st *connState) {
	if st != nil && st.link == 0 && len(st.allocs) == 0 && st.release == nil && p.conns[st.id] == st {
		delete(p.conns, st.id)
	}
}

// refreshHopsLocked makes the nexthops of st's link the LB addresses of its
// allocations, and reports whether they changed. p.mu must be held.
func (p *Proxy) refreshHopsLocked(st *connState) bool {
	if st.link == 0 {
		return false
	}
	var hops []netip.Addr
	if st.typ == LBConn {
		for _, f := range p.cfg.Families {
			if a, ok := st.allocs[childKey{f, st.id + srcSuffix}]; ok {
				hops = append(hops, a.Addr().Unmap())
			}
		}
	}
	if slices.Equal(hops, st.hops) {
		return false
	}
	for _, a := range st.hops {
		if !slices.Contains(hops, a) {
			p.portsHops.removeHop(a, st.link)
		}
	}
	for _, a := range hops {
		p.portsHops.addHop(a, st.link)
	}
	st.hops = hops
	return true
}

// portFilterLocked is what st's port is held to: a target's port to its
// own addresses (the dataplane adds the VIPs), unless PortFilterOff; an
// LB's port is not filtered. p.mu must be held.
func (p *Proxy) portFilterLocked(st *connState) *dataplane.PortFilter {
	if st.typ != TargetConn || p.cfg.PortFilterOff {
		return nil
	}
	return &dataplane.PortFilter{Addrs: p.targetAddrsLocked(st)}
}

// refreshFilterLocked makes the filter of st's port follow its addresses,
// and reports whether it changed. p.mu must be held.
func (p *Proxy) refreshFilterLocked(st *connState) bool {
	if st.link == 0 {
		return false
	}
	return p.portsHops.setFilter(st.link, p.portFilterLocked(st))
}

// InterfaceOf returns the interface of the connection of type t with key
// key: its link, as last announced by InterfaceCreated and not deleted
// since. The proxy is the one owner of which link is whose; the interface
// monitor asks it.
func (p *Proxy) InterfaceOf(t ConnType, key string) (Interface, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.conns[key]
	if st == nil || st.typ != t || st.link == 0 {
		return Interface{}, false
	}
	return st.iface(), true
}

// InterfaceAt returns the interface announced on link index and not
// deleted since.
func (p *Proxy) InterfaceAt(index int) (Interface, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.links[index]
	if !ok {
		return Interface{}, false
	}
	return p.conns[id].iface(), true
}

// iface is the interface of st's link. p.mu must be held.
func (st *connState) iface() Interface {
	return Interface{Index: st.link, Name: st.linkName, Type: st.typ, ConnKey: st.id}
}
