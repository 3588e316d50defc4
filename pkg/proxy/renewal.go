package proxy

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-net/causeway/internal/backoff"
)

// A renewal is a request of a connection whose addresses the proxy already
// holds (an NSM refresh, a heal): its IPAM calls only renew leases. When the
// IPAM does not answer them, the connection keeps its addresses instead of
// failing: a refresh that fails makes NSM tear the connection's data path
// down, and an IPAM outage longer than one refresh period would disconnect
// every target. The leases are then owed a renewal, which the owed loop
// retries until the IPAM answers.

// maxOwedBackoff caps the pause between the owed loop's rounds.
const maxOwedBackoff = 5 * time.Second

// holdsAll says whether held has every child of id.
func (p *Proxy) holdsAll(held map[childKey]netip.Prefix, id string) bool {
	for _, k := range p.children(id) {
		if _, ok := held[k]; !ok {
			return false
		}
	}
	return true
}

// renewalContext bounds the IPAM calls of a renewal to a third of what the
// request has left (the rest is for the answer), and to IPAMTimeout.
func (p *Proxy) renewalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := p.cfg.IPAMTimeout
	if deadline, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(deadline)/3)
	}
	return context.WithTimeout(ctx, d)
}

// ipamUnreachable says whether every error in err says that the IPAM did not
// answer (unavailable, or out of time), not that it refused.
func ipamUnreachable(err error) bool {
	if err == nil {
		return false
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if !ipamUnreachable(e) {
				return false
			}
		}
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// keepHeld returns got completed with the held addresses of the children the
// IPAM did not answer for.
func keepHeld(held, got map[childKey]netip.Prefix) map[childKey]netip.Prefix {
	out := maps.Clone(held)
	maps.Copy(out, got)
	return out
}

// deferRenewal records that the leases of id are owed a renewal the IPAM
// could not give now, and wakes the owed loop.
func (p *Proxy) deferRenewal(id string) {
	p.mu.Lock()
	p.owed[id] = struct{}{}
	p.counters.renewalsDeferred++
	p.mu.Unlock()
	select {
	case p.owedKick <- struct{}{}:
	default:
	}
}

// renewalDone records that the leases of id are renewed (or released): no
// renewal is owed any more.
func (p *Proxy) renewalDone(id string) {
	p.mu.Lock()
	delete(p.owed, id)
	p.mu.Unlock()
}

// owedLoop renews the owed leases, in rounds with a growing pause, until
// none is owed; then it waits for the next.
func (p *Proxy) owedLoop(ctx context.Context) {
	defer p.bgWG.Done()
	wait := backoff.New(p.cfg.RetryInterval, maxOwedBackoff)
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.owedKick:
		}
		for !p.renewOwed(ctx) {
			if !wait.Wait(ctx) {
				return
			}
		}
		wait.Reset()
	}
}

// renewOwed tries every owed renewal once and reports whether none is left.
func (p *Proxy) renewOwed(ctx context.Context) bool {
	p.mu.Lock()
	ids := slices.Collect(maps.Keys(p.owed))
	p.mu.Unlock()
	for _, id := range ids {
		if ctx.Err() != nil {
			return false
		}
		p.renewOwedID(ctx, id)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.owed) == 0
}

// renewOwedID renews the leases of id, under its lock. A connection whose
// addresses are no longer all held (released, or being released) owes
// nothing. The proxy's addresses stay as they are: an address the IPAM
// answers differently is followed by the connection's next request, which
// can tell the connection.
func (p *Proxy) renewOwedID(ctx context.Context, id string) {
	unlock, err := p.locks.lock(ctx, id)
	if err != nil {
		return
	}
	defer unlock()
	held := map[childKey]netip.Prefix{}
	p.mu.Lock()
	if st := p.conns[id]; st != nil && st.release == nil {
		maps.Copy(held, st.allocs)
	}
	p.mu.Unlock()
	if !p.holdsAll(held, id) {
		p.renewalDone(id)
		return
	}
	actx, cancel := context.WithTimeout(ctx, p.cfg.IPAMTimeout)
	got, _, err := p.allocateChildren(actx, id)
	cancel()
	log := p.log.With("id", id)
	if err != nil {
		log.Debug("deferred lease renewal failed, retrying", "error", err)
		return
	}
	for k, a := range got {
		if held[k] != a {
			log.Warn("the IPAM answered another address than the one held; the connection's next request follows it",
				"family", k.Family.String(), "child", k.Name, "held", held[k], "answered", a)
		}
	}
	p.renewalDone(id)
	log.Info("deferred lease renewal done")
}
