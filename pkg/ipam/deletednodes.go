package ipam

import "time"

// NodeNames returns the name of every node that holds a subnet, in any
// conduit of any family, once each.
func (e *Engine) NodeNames() []string {
	seen := map[string]struct{}{}
	var out []string
	for _, t := range e.trenches {
		for _, c := range t.conduitList() {
			t.mu.RLock()
			c.mu.RLock()
			for name := range c.nodes {
				if _, ok := seen[name]; !ok {
					seen[name] = struct{}{}
					out = append(out, name)
				}
			}
			c.mu.RUnlock()
			t.mu.RUnlock()
		}
	}
	return out
}

// FreeNode frees the subnets of the node named name, with their children
// (the bridge included), in every conduit where the lease of the node and
// of each of its children has ended (renewed longer than the GC threshold
// ago): what the collector does for such a node, done now for a node that
// has left the cluster, whose bridge lease would otherwise be renewed by
// nobody and its subnet kept by nobody. It returns how many subnets it
// freed and when the last lease of those it kept ends (zero if it kept
// none). Without a GC threshold no lease ends and nothing is freed.
func (e *Engine) FreeNode(name string) (freed int, leasedUntil time.Time) {
	if e.cfg.GCThreshold <= 0 {
		return 0, time.Time{}
	}
	cutoff := e.now().Add(-e.cfg.GCThreshold).UnixNano()
	var newest int64
	for _, t := range e.trenches {
		for _, c := range t.conduitList() {
			ok, lease := e.freeNodeIn(t, c, name, cutoff)
			if ok {
				freed++
				e.log.Info("deleted node's subnet freed", "family", t.family, "conduit", c.name, "node", name)
				e.reapDrained(t, c)
			}
			newest = max(newest, lease)
		}
	}
	if newest == 0 {
		return freed, time.Time{}
	}
	return freed, time.Unix(0, newest).Add(e.cfg.GCThreshold)
}

// freeNodeIn frees node name of c if its leases have ended; otherwise it
// returns its newest lease (0 if c has no such node).
func (e *Engine) freeNodeIn(t *trench, c *conduit, name string, cutoff int64) (bool, int64) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nodes[name]
	if !ok {
		return false, 0
	}
	if n.updated.Load() < cutoff && !n.childLeased(cutoff) {
		e.removeNodeLocked(t, c, n)
		return true, 0
	}
	newest := n.updated.Load()
	for _, ch := range n.children {
		newest = max(newest, ch.updated.Load())
	}
	return false, newest
}
