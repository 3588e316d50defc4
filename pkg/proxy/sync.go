package proxy

import (
	"context"
	"net/netip"
	"slices"

	"github.com/causeway-net/causeway/pkg/dataplane"
)

// desiredStateLocked computes the dataplane state from the model. p.mu must
// be held. The result is sorted so that equal models give equal states.
func (p *Proxy) desiredStateLocked() dataplane.State {
	var s dataplane.State
	for _, f := range p.cfg.Families {
		if b, ok := p.bridge[f]; ok {
			s.BridgeAddrs = append(s.BridgeAddrs, b)
		}
	}
	// A nexthop is tied to the port it is reached through, so that the
	// dataplane drops it as soon as the link goes; an address announced by
	// two interfaces is not tied (the control plane removes it).
	hops := map[netip.Addr]int{} // address → port, or 0 when ambiguous
	for idx, i := range p.ifaces {
		s.Ports = append(s.Ports, idx)
		if i.Type != LBConn {
			continue
		}
		for _, a := range i.NeighborAddrs {
			if !a.IsValid() {
				continue
			}
			a = a.Unmap()
			if port, seen := hops[a]; seen && port != idx {
				hops[a] = 0
			} else {
				hops[a] = idx
			}
		}
	}
	slices.Sort(s.Ports)
	for a, port := range hops {
		s.Nexthops = append(s.Nexthops, a)
		if port > 0 {
			if s.NexthopPorts == nil {
				s.NexthopPorts = map[netip.Addr]int{}
			}
			s.NexthopPorts[a] = port
		}
	}
	slices.SortFunc(s.Nexthops, func(a, b netip.Addr) int { return a.Compare(b) })
	s.VIPs = slices.Clone(p.vips)
	return s
}

// syncLoop is the only caller of the dataplane: it applies the full desired
// state whenever the model changed (changes made during an Apply coalesce
// into one more Apply), retrying failed applies every RetryInterval. The
// dataplane flushes the conntrack entries of what an Apply removes.
func (p *Proxy) syncLoop(ctx context.Context) {
	defer p.bgWG.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.dirty:
		}
		p.mu.Lock()
		state := p.desiredStateLocked()
		p.mu.Unlock()

		if err := p.cfg.Dataplane.Apply(state); err != nil {
			p.mu.Lock()
			p.counters.applyErrors++
			p.mu.Unlock()
			p.log.Error("dataplane apply failed, will retry", "error", err)
			if !sleep(ctx.Done(), p.cfg.RetryInterval) {
				return
			}
			p.markDirty()
			continue
		}
		p.mu.Lock()
		p.counters.applies++
		p.mu.Unlock()
		p.log.Debug("dataplane state applied", "bridge", state.BridgeAddrs, "ports", state.Ports,
			"nexthops", state.Nexthops, "vips", state.VIPs)
	}
}
