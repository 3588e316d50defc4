package dataplane

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// maxPending bounds the notifications queued for the reconciler; past it
// they are dropped and the whole kind is marked for a read instead.
const maxPending = 8192

// pending collects what the subscriptions saw, for the reconciler. They
// only append here (never waiting for the Dataplane's lock); the reconciler
// compares the notifications with the model under the lock.
type pending struct {
	mu       sync.Mutex
	stale    kinds // to read back: notifications dropped, subscriptions lost, writes failed
	linkGone map[int]struct{}
	linkBack map[int]struct{}
	linkChg  map[int]struct{}
	addrs    []netlink.AddrUpdate
	routes   []netlink.RouteUpdate
	rules    []ruleEvent
}

func (p *pending) init() {
	p.linkGone = map[int]struct{}{}
	p.linkBack = map[int]struct{}{}
	p.linkChg = map[int]struct{}{}
}

func (dp *Dataplane) wake() {
	select {
	case dp.kick <- struct{}{}:
	default:
	}
}

// markStale marks kinds to read back and wakes the reconciler.
func (dp *Dataplane) markStale(k kinds) {
	if k == 0 {
		return
	}
	dp.deferStale(k)
	dp.wake()
}

// deferStale marks kinds to read back at the reconciler's next pass,
// without waking it (it is behind the rate limit, with its timer set).
func (dp *Dataplane) deferStale(k kinds) {
	dp.pen.mu.Lock()
	dp.pen.stale |= k
	dp.pen.mu.Unlock()
}

// onLinkEvent is the link table's internal subscriber.
func (dp *Dataplane) onLinkEvent(ev LinkEvent) {
	p := &dp.pen
	p.mu.Lock()
	switch ev.Type {
	case LinkDeleted:
		p.linkGone[ev.Index] = struct{}{}
		delete(p.linkBack, ev.Index)
		delete(p.linkChg, ev.Index)
	case LinkAdded:
		p.linkBack[ev.Index] = struct{}{}
		delete(p.linkGone, ev.Index)
		p.linkChg[ev.Index] = struct{}{}
	case LinkChanged:
		p.linkChg[ev.Index] = struct{}{}
		if !ev.Up && int64(ev.Index) == dp.bridgeIdx.Load() {
			// The kernel flushes IPv4 routes over a device that goes
			// down without notifying their deletion, and IPv6 drops the
			// addresses: read everything back.
			p.stale |= kAll
		}
	}
	p.mu.Unlock()
	dp.wake()
}

// enqueue queues one notification (in q, a list of dp.pen) for the
// reconciler; past maxPending it drops it and marks its kind k stale
// instead.
func enqueue[T any](dp *Dataplane, q *[]T, k kinds, u T) {
	dp.pen.mu.Lock()
	if len(*q) < maxPending {
		*q = append(*q, u)
	} else {
		dp.pen.stale |= k
	}
	dp.pen.mu.Unlock()
	dp.wake()
}

// forcingBuffer subscribes with the receive buffer forced to the
// configured size and, when that is refused (SO_RCVBUFFORCE needs
// CAP_NET_ADMIN), again with the default buffer.
func (dp *Dataplane) forcingBuffer(subscribe func(size int, force bool) error) error {
	if err := subscribe(dp.opts.ReceiveBuffer, true); err == nil {
		return nil
	}
	return subscribe(0, false)
}

// staleOnResubscribe is the resync of a subscription whose objects the
// next convergence reads again: after the first subscription, the events
// missed while none was open mark kinds stale.
func (dp *Dataplane) staleOnResubscribe(k kinds) func(first bool) bool {
	return func(first bool) bool {
		if !first {
			dp.markStale(k)
		}
		return true
	}
}

func (dp *Dataplane) runAddrSubscription(ctx context.Context) {
	runSubscription(ctx, "address", dp.log, subscriptionBuffer,
		func(ch chan netlink.AddrUpdate, done chan struct{}, cb func(error)) error {
			ns := dp.ns
			return dp.forcingBuffer(func(size int, force bool) error {
				return netlink.AddrSubscribeWithOptions(ch, done, netlink.AddrSubscribeOptions{
					Namespace: &ns, ErrorCallback: cb, ReceiveBufferSize: size, ReceiveBufferForceSize: force,
				})
			})
		},
		dp.staleOnResubscribe(kAddrs),
		func(u netlink.AddrUpdate) {
			dp.ctr.addrEvents.Add(1)
			enqueue(dp, &dp.pen.addrs, kAddrs, u)
		},
		func() { dp.ctr.addrResubscribes.Add(1) })
}

func (dp *Dataplane) runRouteSubscription(ctx context.Context) {
	runSubscription(ctx, "route", dp.log, subscriptionBuffer,
		func(ch chan netlink.RouteUpdate, done chan struct{}, cb func(error)) error {
			ns := dp.ns
			return dp.forcingBuffer(func(size int, force bool) error {
				return netlink.RouteSubscribeWithOptions(ch, done, netlink.RouteSubscribeOptions{
					Namespace: &ns, ErrorCallback: cb, ReceiveBufferSize: size, ReceiveBufferForceSize: force,
				})
			})
		},
		dp.staleOnResubscribe(kRoutes4|kRoutes6),
		func(u netlink.RouteUpdate) {
			if u.Route.Table != dp.table {
				return
			}
			dp.ctr.routeEvents.Add(1)
			enqueue(dp, &dp.pen.routes, kRoutes4|kRoutes6, u)
		},
		func() { dp.ctr.routeResubscribes.Add(1) })
}

func (dp *Dataplane) runRuleSubscription(ctx context.Context) {
	runSubscription(ctx, "rule", dp.log, subscriptionBuffer,
		func(ch chan ruleEvent, done chan struct{}, cb func(error)) error {
			return subscribeRules(dp.ns, dp.opts.ReceiveBuffer, ch, done, cb)
		},
		dp.staleOnResubscribe(kRules),
		func(ev ruleEvent) {
			if ev.table != dp.table {
				return
			}
			dp.ctr.ruleEvents.Add(1)
			enqueue(dp, &dp.pen.rules, kRules, ev)
		},
		func() { dp.ctr.ruleResubscribes.Add(1) })
}

// Repairs that read the kernel are rate limited: at most one pass per
// minRepairInterval, and after a failed pass the interval doubles up to
// maxRepairInterval, so that a foreign agent fighting over an object, or a
// write the kernel keeps refusing, costs a bounded amount of work. Link
// existence changes (a failover) need no read and are never delayed.
const (
	minRepairInterval = 20 * time.Millisecond
	maxRepairInterval = 5 * time.Second
)

// reconcileLoop handles what the subscriptions queued and runs the periodic
// backstop re-sync, repairing behind the rate limit above.
func (dp *Dataplane) reconcileLoop(ctx context.Context) {
	var tick <-chan time.Time
	if dp.opts.ResyncInterval > 0 {
		t := time.NewTicker(dp.opts.ResyncInterval)
		defer t.Stop()
		tick = t.C
	}
	interval, flushRetry := minRepairInterval, time.Duration(0)
	var nextRead, nextFlush time.Time
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-dp.kick:
		case <-tick:
			dp.markStale(kAll)
		case <-timer.C:
		}
		now := time.Now()
		r := dp.reconcile(!now.Before(nextRead), !now.Before(nextFlush))
		switch {
		case len(r.flush) == 0: // none due, or one waiting for its retry
		case dp.flushConntrackLogged(r.flush):
			flushRetry = 0
		default:
			flushRetry = min(max(2*flushRetry, minFlushRetry), maxFlushRetry)
			nextFlush = now.Add(flushRetry)
		}
		if r.bridgeChanged {
			interval = minRepairInterval // what failed may work now
		}
		if r.read {
			if r.failed {
				interval = min(2*interval, maxRepairInterval)
			} else {
				interval = minRepairInterval
			}
			nextRead = now.Add(interval)
		}
		var wake time.Time // the earliest of a deferred read and a flush retry
		if r.deferred || r.failed {
			wake = nextRead
		}
		if flushRetry > 0 && (wake.IsZero() || nextFlush.Before(wake)) {
			wake = nextFlush
		}
		if !wake.IsZero() {
			timer.Reset(max(time.Until(wake), time.Millisecond))
		}
	}
}

// Resync reads the whole kernel state the Dataplane owns and repairs what
// diverged, now (the periodic re-sync does the same). It returns the errors
// of the repairs.
func (dp *Dataplane) Resync() error {
	dp.mu.Lock()
	if dp.closed {
		dp.mu.Unlock()
		return ErrClosed
	}
	err := dp.repairLocked(kAll, true)
	due := dp.flush.take(dp.goal)
	dp.mu.Unlock()
	if !dp.flushConntrackLogged(due) {
		dp.wake() // the reconciler retries it
	}
	return err
}

// repairLocked converges to the applied state after reading back reread;
// what fails is marked stale again for the reconciler. The writes count as
// restores when the kernel diverged (reread, or diverged: a port found
// released), not when they follow a link's coming or going (a failover).
func (dp *Dataplane) repairLocked(reread kinds, diverged bool) error {
	if reread != 0 {
		dp.ctr.reconciles.Add(1)
	}
	before := dp.ctr.writes.Load()
	failed, err := dp.convergeLocked(dp.goal, reread)
	if n := dp.ctr.writes.Load() - before; n > 0 && (reread != 0 || diverged) {
		dp.ctr.restores.Add(n)
		dp.log.Info("restored kernel state", "writes", n)
	}
	dp.markStale(failed)
	return err
}

// reconcileResult is what one reconcile pass did.
type reconcileResult struct {
	read, failed, deferred, bridgeChanged bool
	// flush are the removed VIPs and nexthops whose conntrack entries the
	// caller flushes, with dp.mu not held.
	flush []netip.Prefix
}

// reconcile takes the queued notifications and compares them with the
// model. What they say about link existence (a port that vanished or came
// back) updates the model without a read; a port whose notification
// disagrees is read back alone; other disagreements mark their kind to be
// read back. Then, if anything changed, it converges to the applied state,
// reading back the stale kinds when allowRead (else they wait, deferred).
// It hands on the queued conntrack flush when allowFlush (a failed one
// waits for its retry).
func (dp *Dataplane) reconcile(allowRead, allowFlush bool) (res reconcileResult) {
	p := &dp.pen
	p.mu.Lock()
	stale := p.stale
	gone, back, chg := p.linkGone, p.linkBack, p.linkChg
	addrs, routes, rules := p.addrs, p.routes, p.rules
	p.stale = 0
	p.init()
	p.addrs, p.routes, p.rules = nil, nil, nil
	p.mu.Unlock()

	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.closed {
		return res
	}
	defer func() {
		if allowFlush {
			res.flush = dp.flush.take(dp.goal)
		}
	}()
	touched, diverged := dp.linkEventsLocked(gone, back, chg, &stale, &res)
	for _, u := range addrs {
		if u.LinkIndex == dp.m.bridgeIndex {
			res.bridgeChanged = true
		}
		if !dp.addrEventMatchesLocked(u) {
			stale |= kAddrs
		}
	}
	for _, u := range routes {
		if !dp.routeEventMatchesLocked(u) {
			if u.Route.Family == unix.AF_INET6 {
				stale |= kRoutes6
			} else {
				stale |= kRoutes4
			}
		}
	}
	for _, ev := range rules {
		if !dp.ruleEventMatchesLocked(ev) {
			stale |= kRules
			break
		}
	}
	if stale != 0 && !allowRead {
		dp.deferStale(stale) // behind the rate limit: at the timer
		stale, res.deferred = 0, true
	}
	if stale == 0 && !touched {
		return res
	}
	res.read = stale != 0
	if err := dp.repairLocked(stale, diverged); err != nil {
		res.failed = true
		dp.log.Warn("reconcile (will retry)", "error", err)
	}
	return res
}

// linkEventsLocked applies the link notifications to the model. It reports
// whether the model changed in a way the next convergence must act on
// (touched) and whether it found the kernel diverged (a port released by
// someone), and adds to stale what must be read back.
func (dp *Dataplane) linkEventsLocked(gone, back, chg map[int]struct{}, stale *kinds, res *reconcileResult) (touched, diverged bool) {
	m := dp.m
	for idx := range gone {
		if idx == m.bridgeIndex {
			*stale |= kAll
			continue
		}
		if ps, ok := m.ports.get(idx); ok && !ps.absent {
			ps.markAbsent()
			touched = true
		} else if !ok && dp.goal.hasPort(idx) {
			touched = true // a tied port outside Ports, say
		}
	}
	for idx := range back {
		if ps, ok := m.ports.get(idx); ok && ps.absent {
			m.ports.remove(idx) // to enslave again
			touched = true
		} else if !ok && dp.goal.hasPort(idx) {
			touched = true
		}
	}
	for idx := range chg {
		l, ok := dp.linkTable.link(idx)
		if !ok {
			continue
		}
		if idx == m.bridgeIndex {
			res.bridgeChanged = true
			if !l.Up || l.Name != dp.opts.BridgeName || l.HardwareAddr != dp.bridgeMAC.String() {
				*stale |= kBridge
			}
			if m.bridgeMTU != 0 && l.MTU != m.bridgeMTU {
				*stale |= kMTU
			}
			continue
		}
		ps, ok := m.ports.get(idx)
		if !ok || !ps.enslaved || ps.absent {
			continue
		}
		if l.MasterIndex != m.bridgeIndex {
			// The link table's view may lag behind our own write: read this
			// one link, not all of them.
			dp.refreshPortLocked(idx)
			if !m.ports.has(idx) {
				touched, diverged = true, true
			}
		} else if l.MTU != ps.mtu {
			ps.mtu = l.MTU
			*stale |= kMTU
		}
	}
	return touched, diverged
}

func (dp *Dataplane) addrEventMatchesLocked(u netlink.AddrUpdate) bool {
	if u.LinkIndex != dp.m.bridgeIndex {
		return true
	}
	pfx, ok := ipNetToPrefix(&u.LinkAddress)
	if !ok || !managedAddr(pfx) {
		return true
	}
	_, have := dp.m.addrs[pfx]
	return have == u.NewAddr
}
