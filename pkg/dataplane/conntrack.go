package dataplane

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/ti-mo/conntrack"
)

// FlushConntrack deletes the conntrack entries that have addr as source or
// destination of their original or reply direction (a removed target, LB or
// VIP), so that a long-lived UDP flow does not keep going to a destination
// that is gone or was reused.
func (dp *Dataplane) FlushConntrack(addr netip.Addr) error {
	if !addr.IsValid() {
		return fmt.Errorf("flush conntrack: invalid address")
	}
	addr = addr.Unmap().WithZone("")
	_, err := dp.flushConntrack([]netip.Prefix{netip.PrefixFrom(addr, addr.BitLen())}, nil)
	return err
}

// FlushConntrackPrefix deletes the conntrack entries with an original or
// reply source or destination address inside p.
func (dp *Dataplane) FlushConntrackPrefix(p netip.Prefix) error {
	if !p.IsValid() {
		return fmt.Errorf("flush conntrack: invalid prefix")
	}
	p = netip.PrefixFrom(p.Addr().Unmap().WithZone(""), p.Bits()).Masked()
	_, err := dp.flushConntrack([]netip.Prefix{p}, nil)
	return err
}

// flushQueue holds the VIPs and nexthops whose rule or route (or place in
// the route) the convergence removed and whose conntrack entries are still to flush. The
// Dataplane is the one owner of that flush: Apply (or the reconciler, when
// it completed a removal) takes the queue at its end and flushes it all in
// one pass. Guarded by Dataplane.mu.
type flushQueue struct {
	due map[netip.Prefix]struct{}
}

// add queues ps (nothing when flushing is disabled: disabled is true).
func (q *flushQueue) add(disabled bool, ps ...netip.Prefix) {
	if disabled || len(ps) == 0 {
		return
	}
	if q.due == nil {
		q.due = map[netip.Prefix]struct{}{}
	}
	for _, p := range ps {
		q.due[p] = struct{}{}
	}
}

// take empties the queue and returns what is to flush, sorted, without the
// prefixes that are wanted again (a VIP added back before its flush ran
// keeps its connections).
func (q *flushQueue) take(goal *spec) []netip.Prefix {
	if len(q.due) == 0 {
		return nil
	}
	var out []netip.Prefix
	for p := range q.due {
		if !goal.hasPrefix(p) {
			out = append(out, p)
		}
	}
	q.due = nil
	slices.SortFunc(out, netip.Prefix.Compare)
	return out
}

// Bounds of the pause between retries of a conntrack flush that failed.
const (
	minFlushRetry = 100 * time.Millisecond
	maxFlushRetry = 5 * time.Second
)

// flushConntrackLogged flushes ps (the end of an Apply or a repair), with
// dp.mu not held: a dump of a large table takes a while, and a failover must
// not wait for it. Entries of a prefix that an Apply wanted again while the
// flush ran are kept. A flush that fails is queued again for the
// reconciler, which retries it (see reconcileLoop); it reports false then.
func (dp *Dataplane) flushConntrackLogged(ps []netip.Prefix) bool {
	if len(ps) == 0 {
		return true
	}
	n, err := dp.flushConntrack(ps, dp.wantedAgain(ps))
	if err == nil {
		dp.log.Debug("flushed conntrack entries of removed VIPs and nexthops", "prefixes", len(ps), "entries", n)
		if dp.ctFailing.Swap(false) {
			dp.log.Info("conntrack flush of removed VIPs and nexthops works again", "prefixes", ps, "entries", n)
		}
		return true
	}
	dp.mu.Lock()
	closed := dp.closed
	if !closed {
		dp.flush.add(false, ps...)
	}
	dp.mu.Unlock()
	if closed {
		return true
	}
	if !dp.ctFailing.Swap(true) {
		dp.log.Warn("conntrack flush of removed VIPs and nexthops failed, retrying", "prefixes", ps, "error", err)
	} else {
		dp.log.Debug("conntrack flush retry failed", "prefixes", ps, "error", err)
	}
	return false
}

// wantedAgain returns the filter that keeps the entries of a flush of ps
// whose address is inside one of ps that the applied state wants again
// (read when the dump is done, right before the deletes).
func (dp *Dataplane) wantedAgain(ps []netip.Prefix) func(*conntrack.Flow) bool {
	return func(f *conntrack.Flow) bool {
		goal := dp.goalShared.Load()
		if goal == nil {
			return false
		}
		for _, a := range []netip.Addr{f.TupleOrig.IP.SourceAddress, f.TupleOrig.IP.DestinationAddress,
			f.TupleReply.IP.SourceAddress, f.TupleReply.IP.DestinationAddress} {
			for _, p := range ps {
				if p.Contains(a.Unmap()) && goal.hasPrefix(p) {
					return true
				}
			}
		}
		return false
	}
}

// flushConntrack deletes the conntrack entries of ps, but those keep wants
// kept (nil: none), through the namespace's flusher; it returns how many it
// deleted.
func (dp *Dataplane) flushConntrack(ps []netip.Prefix, keep func(*conntrack.Flow) bool) (int, error) {
	dp.mu.Lock()
	closed := dp.closed
	dp.mu.Unlock()
	if closed {
		return 0, ErrClosed
	}
	n, err := dp.ct.Flush(ps, keep)
	dp.ctr.ctDeleted.Add(uint64(n))
	return n, err
}
