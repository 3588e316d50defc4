package proxy

import (
	"context"

	"github.com/causeway-net/causeway/internal/backoff"
	"github.com/causeway-net/causeway/pkg/dataplane"
)

// desiredStateLocked is the dataplane state of the model, without the
// nexthops found down (SetNexthopsDown), with the links to delete, and the
// closed connections' links among them. p.mu must be held. It shares the
// model's ports, nexthops and VIPs (which are replaced, never changed in
// place).
func (p *Proxy) desiredStateLocked() (dataplane.State, []*closedLink) {
	s := p.portsHops.state(p.bridgePrefixesLocked(), p.vips)
	closed := p.removals.into(&s, func(id string) bool { st := p.conns[id]; return st != nil && st.link != 0 })
	s.ReleaseLeftovers = p.releaseLeftovers
	s.Nexthops = routedNexthops(s.Nexthops, p.hopsDown)
	return s, closed
}

// syncLoop is the only caller of the dataplane: it applies the desired state
// whenever the model changed (changes made during an Apply coalesce
// into one more Apply), retrying failed applies every RetryInterval. The
// dataplane flushes the conntrack entries of what an Apply removes. An
// Apply that deletes a closed connection's link runs under p.mu (see
// removeLeftoverLink); the others do not hold it.
func (p *Proxy) syncLoop(ctx context.Context) {
	defer p.bgWG.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.dirty:
		}
		p.mu.Lock()
		state, closed := p.desiredStateLocked()
		if len(closed) == 0 {
			p.mu.Unlock()
		}
		err := p.cfg.Dataplane.Apply(state)
		if len(closed) == 0 {
			p.mu.Lock()
		}
		if err != nil {
			p.counters.applyErrors++
			p.mu.Unlock()
			p.log.Error("dataplane apply failed, will retry", "error", err)
			if !backoff.Sleep(ctx, p.cfg.RetryInterval) {
				return
			}
			p.markDirty()
			continue
		}
		p.counters.applies++
		p.removals.done(state, closed)
		p.mu.Unlock()
		p.log.Debug("dataplane state applied", "bridge", state.BridgeAddrs, "ports", len(state.Ports),
			"nexthops", state.Nexthops, "vips", state.VIPs, "removed", state.Remove)
	}
}

// ReleaseLeftovers ends the dataplane's hold on the kernel state found at
// start (dataplane.State.ReleaseLeftovers), from the next Apply on; a
// failed release is retried as any failed Apply is.
func (p *Proxy) ReleaseLeftovers() {
	p.mu.Lock()
	p.releaseLeftovers = true
	p.mu.Unlock()
	p.markDirty()
}
