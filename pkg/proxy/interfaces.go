package proxy

// InterfaceCreated records an NSM interface of the proxy's namespace: it
// becomes a bridge port, and for an LB connection its NeighborAddrs become
// ECMP nexthops. A second create for the same index replaces the first (a
// refresh may change the addresses). Events are applied in the order they
// arrive, the last one wins: a create after a delete of the same link adds
// it again (the interface monitor announces an address change as a delete
// followed by a create of the same link). The dataplane ignores ports whose
// link no longer exists.
func (p *Proxy) InterfaceCreated(i Interface) {
	log := p.log.With("index", i.Index, "name", i.Name, "type", i.Type.String(), "connID", i.ConnID)
	if i.Index <= 0 || (i.Type != TargetConn && i.Type != LBConn) {
		log.Warn("interface create ignored: no index or unknown type")
		return
	}
	p.mu.Lock()
	old, had := p.ifaces[i.Index]
	p.ifaces[i.Index] = i
	p.mu.Unlock()
	if had && interfaceEqual(old, i) {
		log.Debug("interface create repeated")
		return
	}
	log.Info("interface added", "local", i.LocalAddrs, "neighbors", i.NeighborAddrs, "replaced", had)
	p.markDirty()
}

// InterfaceDeleted removes an interface's port and nexthops. The interface
// is resolved by index, so a kernel event that only knows the index (and
// perhaps the name) removes everything the create added. Deleting an unknown
// interface is a no-op.
func (p *Proxy) InterfaceDeleted(i Interface) {
	if i.Index <= 0 {
		p.log.Warn("interface delete ignored: no index", "name", i.Name, "connID", i.ConnID)
		return
	}
	p.mu.Lock()
	old, had := p.ifaces[i.Index]
	delete(p.ifaces, i.Index)
	p.mu.Unlock()
	if !had {
		p.log.Debug("interface delete of an unknown interface", "index", i.Index, "name", i.Name)
		return
	}
	p.log.Info("interface removed", "index", i.Index, "name", old.Name, "type", old.Type.String(),
		"connID", old.ConnID, "neighbors", old.NeighborAddrs)
	p.markDirty()
}

func interfaceEqual(a, b Interface) bool {
	if a.Index != b.Index || a.Name != b.Name || a.Type != b.Type || a.ConnID != b.ConnID ||
		len(a.LocalAddrs) != len(b.LocalAddrs) || len(a.NeighborAddrs) != len(b.NeighborAddrs) {
		return false
	}
	for i := range a.LocalAddrs {
		if a.LocalAddrs[i] != b.LocalAddrs[i] {
			return false
		}
	}
	for i := range a.NeighborAddrs {
		if a.NeighborAddrs[i] != b.NeighborAddrs[i] {
			return false
		}
	}
	return true
}
