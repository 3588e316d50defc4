package proxy

import (
	"net/netip"
	"slices"
	"sync"
)

// TargetAddrs are the addresses of the targets connected to the proxy:
// the target-side addresses the proxy handed out (never the VIPs a target
// carries too) of the target connections whose interface is a port of the
// bridge, sorted.
func (p *Proxy) TargetAddrs() []netip.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []netip.Addr
	for _, st := range p.conns {
		if st.typ != TargetConn || st.link == 0 {
			continue
		}
		for _, f := range p.cfg.Families {
			if a, ok := st.allocs[childKey{f, st.id + srcSuffix}]; ok {
				out = append(out, a.Addr().Unmap())
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// watchers signal the subscribers of WatchTargets.
type watchers struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// WatchTargets returns a channel that receives a signal (coalesced) after
// each change of the proxy's model, so that a subscriber can read
// TargetAddrs again, and the function that ends the subscription.
func (p *Proxy) WatchTargets() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	p.watch.mu.Lock()
	if p.watch.subs == nil {
		p.watch.subs = map[chan struct{}]struct{}{}
	}
	p.watch.subs[ch] = struct{}{}
	p.watch.mu.Unlock()
	return ch, func() {
		p.watch.mu.Lock()
		delete(p.watch.subs, ch)
		p.watch.mu.Unlock()
	}
}

func (w *watchers) signal() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
