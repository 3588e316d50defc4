package proxy

// tombstoneLimit bounds the memory of deleted interfaces.
const tombstoneLimit = 256

// tombstones remembers recently deleted interfaces by (index, name) so that
// a create event delivered after the delete of the same link is ignored.
// Kernel indexes and NSM interface names are not reused together in
// practice, so the pair identifies one link.
type tombstones struct {
	order []tombKey
	set   map[tombKey]struct{}
}

type tombKey struct {
	index int
	name  string
}

func (t *tombstones) add(k tombKey) {
	if t.set == nil {
		t.set = map[tombKey]struct{}{}
	}
	if _, ok := t.set[k]; ok {
		return
	}
	t.set[k] = struct{}{}
	t.order = append(t.order, k)
	if len(t.order) > tombstoneLimit {
		delete(t.set, t.order[0])
		t.order = t.order[1:]
	}
}

func (t *tombstones) has(k tombKey) bool {
	_, ok := t.set[k]
	return ok
}

// InterfaceCreated records an NSM interface of the proxy's namespace: it
// becomes a bridge port, and for an LB connection its NeighborAddrs become
// ECMP nexthops. A second create for the same index replaces the first (a
// refresh may change the addresses). A create for a link already reported
// deleted is ignored.
func (p *Proxy) InterfaceCreated(i Interface) {
	log := p.log.With("index", i.Index, "name", i.Name, "type", i.Type.String(), "connID", i.ConnID)
	if i.Index <= 0 || (i.Type != TargetConn && i.Type != LBConn) {
		log.Warn("interface create ignored: no index or unknown type")
		return
	}
	p.mu.Lock()
	if p.tombstones.has(tombKey{i.Index, i.Name}) {
		p.mu.Unlock()
		log.Info("interface create ignored: the link was already deleted")
		return
	}
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
	name := i.Name
	if had {
		name = old.Name
		delete(p.ifaces, i.Index)
	}
	if name != "" {
		p.tombstones.add(tombKey{i.Index, name})
	}
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
