package dataplane

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// dirty says which kinds of objects the reconciler must read back from the
// kernel and repair.
type dirty uint32

const (
	dBridge dirty = 1 << iota
	dAddrs
	dPorts
	dMTU
	dRoutes4
	dRoutes6
	dRules

	dAll = dBridge | dAddrs | dPorts | dMTU | dRoutes4 | dRoutes6 | dRules
)

// maxPending bounds the notifications queued for the reconciler; past it
// they are dropped and the whole kind is marked for a read instead.
const maxPending = 8192

// pending collects what the monitors saw, for the reconciler. The monitors
// only append here (never waiting for the Dataplane's lock); the reconciler
// compares the notifications with the model under the lock.
type pending struct {
	mu       sync.Mutex
	flags    dirty
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

func (dp *Dataplane) markDirty(d dirty) {
	dp.pen.mu.Lock()
	dp.pen.flags |= d
	dp.pen.mu.Unlock()
	dp.wake()
}

// onLinkEvent is the link monitor's internal subscriber.
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
			p.flags |= dAll
		}
	}
	p.mu.Unlock()
	dp.wake()
}

func (dp *Dataplane) runAddrSubscription(ctx context.Context) {
	runSubscription(ctx, "address", dp.log, 1024,
		func(ch chan netlink.AddrUpdate, done chan struct{}, cb func(error)) error {
			ns := dp.ns
			err := netlink.AddrSubscribeWithOptions(ch, done, netlink.AddrSubscribeOptions{
				Namespace: &ns, ErrorCallback: cb,
				ReceiveBufferSize: dp.opts.ReceiveBuffer, ReceiveBufferForceSize: true,
			})
			if err != nil { // SO_RCVBUFFORCE needs CAP_NET_ADMIN
				err = netlink.AddrSubscribeWithOptions(ch, done, netlink.AddrSubscribeOptions{Namespace: &ns, ErrorCallback: cb})
			}
			return err
		},
		func(first bool) {
			if !first {
				dp.markDirty(dAddrs)
			}
		},
		func(u netlink.AddrUpdate) {
			dp.ctr.addrEvents.Add(1)
			p := &dp.pen
			p.mu.Lock()
			if len(p.addrs) < maxPending {
				p.addrs = append(p.addrs, u)
			} else {
				p.flags |= dAddrs
			}
			p.mu.Unlock()
			dp.wake()
		},
		func() { dp.ctr.addrResubscribes.Add(1) })
}

func (dp *Dataplane) runRouteSubscription(ctx context.Context) {
	runSubscription(ctx, "route", dp.log, 1024,
		func(ch chan netlink.RouteUpdate, done chan struct{}, cb func(error)) error {
			ns := dp.ns
			err := netlink.RouteSubscribeWithOptions(ch, done, netlink.RouteSubscribeOptions{
				Namespace: &ns, ErrorCallback: cb,
				ReceiveBufferSize: dp.opts.ReceiveBuffer, ReceiveBufferForceSize: true,
			})
			if err != nil { // SO_RCVBUFFORCE needs CAP_NET_ADMIN
				err = netlink.RouteSubscribeWithOptions(ch, done, netlink.RouteSubscribeOptions{Namespace: &ns, ErrorCallback: cb})
			}
			return err
		},
		func(first bool) {
			if !first {
				dp.markDirty(dRoutes4 | dRoutes6)
			}
		},
		func(u netlink.RouteUpdate) {
			if u.Route.Table != dp.table {
				return
			}
			dp.ctr.routeEvents.Add(1)
			p := &dp.pen
			p.mu.Lock()
			if len(p.routes) < maxPending {
				p.routes = append(p.routes, u)
			} else {
				p.flags |= dRoutes4 | dRoutes6
			}
			p.mu.Unlock()
			dp.wake()
		},
		func() { dp.ctr.routeResubscribes.Add(1) })
}

func (dp *Dataplane) runRuleSubscription(ctx context.Context) {
	runSubscription(ctx, "rule", dp.log, 1024,
		func(ch chan ruleEvent, done chan struct{}, cb func(error)) error {
			return subscribeRules(dp.ns, dp.opts.ReceiveBuffer, ch, done, cb)
		},
		func(first bool) {
			if !first {
				dp.markDirty(dRules)
			}
		},
		func(ev ruleEvent) {
			if ev.table != dp.table {
				return
			}
			dp.ctr.ruleEvents.Add(1)
			p := &dp.pen
			p.mu.Lock()
			if len(p.rules) < maxPending {
				p.rules = append(p.rules, ev)
			} else {
				p.flags |= dRules
			}
			p.mu.Unlock()
			dp.wake()
		},
		func() { dp.ctr.ruleResubscribes.Add(1) })
}

// reconcileLoop handles what the monitors queued, retries (with backoff)
// what failed, and runs the periodic backstop re-sync.
func (dp *Dataplane) reconcileLoop(ctx context.Context) {
	var tick <-chan time.Time
	if dp.opts.ResyncInterval > 0 {
		t := time.NewTicker(dp.opts.ResyncInterval)
		defer t.Stop()
		tick = t.C
	}
	const minBackoff, maxBackoff = 20 * time.Millisecond, 5 * time.Second
	backoff := minBackoff
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	armed := false
	for {
		due := false
		select {
		case <-ctx.Done():
			retry.Stop()
			return
		case <-dp.kick:
		case <-tick:
			dp.pen.mu.Lock()
			dp.pen.flags |= dAll
			dp.pen.mu.Unlock()
		case <-retry.C:
			armed, due = false, true
		}
		if !dp.reconcile(due) {
			backoff = minBackoff
			if armed {
				retry.Stop()
				armed = false
			}
			continue
		}
		if !armed {
			retry.Reset(backoff)
			armed = true
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

func (dp *Dataplane) retryLocked(d dirty) {
	if d != 0 {
		dp.retry |= d
		dp.wake()
	}
}

// Resync reads the whole kernel state the Dataplane owns and repairs what
// diverged, now (the periodic re-sync does the same). It returns the errors
// of the repairs.
func (dp *Dataplane) Resync() error {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.closed {
		return ErrClosed
	}
	_, err := dp.verifyLocked(dAll)
	return err
}

// reconcile takes the queued notifications, applies what they say about
// link existence (ports that vanished or came back: no read needed), and
// reads back and repairs the kinds of objects whose notifications disagree
// with the model. With retryDue, or when the bridge or its addresses
// changed (an IPv6 address becoming usable, say), it also retries what
// failed before. It reports whether something still awaits a retry.
func (dp *Dataplane) reconcile(retryDue bool) bool {
	p := &dp.pen
	p.mu.Lock()
	flags := p.flags
	gone, back, chg := p.linkGone, p.linkBack, p.linkChg
	addrs, routes, rules := p.addrs, p.routes, p.rules
	p.flags = 0
	p.init()
	p.addrs, p.routes, p.rules = nil, nil, nil
	p.mu.Unlock()

	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.closed {
		return false
	}
	m := dp.m
	portsMoved := false
	bridgeEvent := false
	for idx := range gone {
		if idx == m.bridgeIndex {
			flags |= dAll
			continue
		}
		if ps, ok := m.ports[idx]; ok && !ps.absent {
			ps.absent, ps.enslaved = true, false
			portsMoved = true
		} else if dp.want != nil && len(dp.want.nexthopPorts) > 0 {
			portsMoved = true // maybe a tied port outside Ports
		}
	}
	for idx := range back {
		if ps, ok := m.ports[idx]; ok && ps.absent {
			ps.absent = false
			portsMoved = true
		} else if dp.want != nil && len(dp.want.nexthopPorts) > 0 {
			portsMoved = true
		}
	}
	for idx := range chg {
		l, ok := dp.mon.link(idx)
		if !ok {
			continue
		}
		if idx == m.bridgeIndex {
			bridgeEvent = true
			if !l.Up || l.Name != dp.opts.BridgeName || l.HardwareAddr != dp.bridgeMAC.String() {
				flags |= dBridge
			}
			flags |= dMTU
			continue
		}
		if ps, ok := m.ports[idx]; ok && ps.enslaved && !ps.absent {
			if l.MasterIndex != m.bridgeIndex {
				flags |= dPorts
			}
			flags |= dMTU
		}
	}
	var errs []error
	if portsMoved {
		// The fast path of a failover: no read, just the new route.
		changed, err := dp.applyPortsLocked(dp.targetPortsLocked())
		if err != nil {
			errs = append(errs, err)
			dp.retry |= dPorts
		}
		if changed {
			flags |= dMTU
		}
		for _, f := range families {
			if err := dp.applyRouteLocked(f, dp.targetNexthopsLocked(f)); err != nil {
				errs = append(errs, err)
				dp.retry |= routeBit(f)
			}
		}
	}
	for _, u := range addrs {
		if u.LinkIndex == m.bridgeIndex {
			bridgeEvent = true
		}
		if !dp.addrEventMatchesLocked(u) {
			flags |= dAddrs
		}
	}
	for _, u := range routes {
		if !dp.routeEventMatchesLocked(u) {
			if u.Route.Family == unix.AF_INET6 {
				flags |= dRoutes6
			} else {
				flags |= dRoutes4
			}
		}
	}
	for _, ev := range rules {
		if !dp.ruleEventMatchesLocked(ev) {
			flags |= dRules
			break
		}
	}
	if retryDue || bridgeEvent {
		flags |= dp.retry
		dp.retry = 0
	}
	failed, err := dp.verifyLocked(flags)
	dp.retry |= failed
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		dp.log.Warn("reconcile (will retry)", "error", err)
	}
	return dp.retry != 0
}

func routeBit(f family) dirty {
	if f == v6 {
		return dRoutes6
	}
	return dRoutes4
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

// verifyLocked reads back the kinds of objects in flags and repairs them.
// It returns the kinds it could not repair, and the errors.
func (dp *Dataplane) verifyLocked(flags dirty) (dirty, error) {
	if flags == 0 {
		return 0, nil
	}
	dp.ctr.reconciles.Add(1)
	before := dp.ctr.writes.Load()
	defer func() {
		if n := dp.ctr.writes.Load() - before; n > 0 {
			dp.ctr.restores.Add(n)
			dp.log.Info("restored kernel state", "writes", n)
		}
	}()
	var errs []error
	var failed dirty
	note := func(d dirty, err error) {
		if err != nil {
			errs = append(errs, err)
			failed |= d
		}
	}
	if flags&dBridge != 0 {
		old := dp.m.bridgeIndex
		if err := dp.ensureBridgeLocked(); err != nil {
			return flags, err // nothing else can be repaired without it
		}
		if dp.m.bridgeIndex != old {
			flags |= dAll
		}
	}
	if flags&dAddrs != 0 {
		if err := dp.loadAddrsLocked(); err != nil {
			note(dAddrs, err)
		} else {
			note(dAddrs, dp.applyAddrsLocked(dp.targetAddrsLocked()))
		}
	}
	if flags&dPorts != 0 {
		if err := dp.loadPortsLocked(dp.want == nil); err != nil {
			note(dPorts, err)
		} else {
			changed, err := dp.applyPortsLocked(dp.targetPortsLocked())
			note(dPorts, err)
			if changed {
				flags |= dMTU
			}
			flags |= dRoutes4 | dRoutes6 // tied nexthops may have changed
		}
	}
	if flags&dMTU != 0 {
		note(dMTU, dp.syncMTULocked())
	}
	for _, f := range families {
		bit := routeBit(f)
		if flags&bit == 0 {
			continue
		}
		note(bit, dp.loadRoutesLocked(f))
		note(bit, dp.applyRouteLocked(f, dp.targetNexthopsLocked(f)))
	}
	if flags&dRules != 0 {
		note(dRules, dp.loadRulesLocked())
		note(dRules, dp.applyRulesLocked(dp.targetRulesLocked()))
	}
	return failed, errors.Join(errs...)
}

// teardownLocked removes everything owned: rules and routes carrying our
// protocol in our table (read from the kernel) and the bridge.
func (dp *Dataplane) teardownLocked() error {
	var errs []error
	if err := dp.loadRulesLocked(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, dp.applyRulesLocked(map[netip.Prefix]struct{}{}))
	for _, f := range families {
		if err := dp.loadRoutesLocked(f); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, dp.applyRouteLocked(f, nil))
	}
	dp.read()
	if l, err := dp.h.LinkByName(dp.opts.BridgeName); err == nil && l.Type() == "bridge" {
		errs = append(errs, dp.write(opLinkDel, dp.bridgeObject(), func() error { return dp.h.LinkDel(l) }))
	}
	dp.m = newModel()
	return errors.Join(errs...)
}
