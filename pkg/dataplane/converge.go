package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// kinds is a set of the kinds of kernel objects the Dataplane owns. It is
// the one dirty set: the kinds whose model is not trusted and must be read
// back from the kernel before the next convergence (a notification
// disagreed with the model, a subscription was lost, a write failed).
type kinds uint16

const (
	kBridge kinds = 1 << iota
	kAddrs
	kPorts
	kMTU
	kRoutes4
	kRoutes6
	kRules
	kFilters
	kGuard

	kAll = kBridge | kAddrs | kPorts | kMTU | kRoutes4 | kRoutes6 | kRules | kFilters | kGuard
)

func routeKind(f family) kinds {
	if f == v6 {
		return kRoutes6
	}
	return kRoutes4
}

// convergeLocked is the only operation that changes what the Dataplane owns
// (the acts that are not state are listed in the package doc): it makes
// what the Dataplane owns equal to goal. Start, Apply, repair after a
// foreign change and Teardown all call it, with different desired states
// (the adopted state, the applied one, the applied one again, the empty
// one) and with the kinds to read back first (reread). The order is the
// dependency order: the bridge, its addresses, its ports and MTU, the
// routes over it, the rules into the table and, for the empty state, the
// bridge's removal last. Each kind is diffed against the model and only the
// difference is written. It returns the kinds that failed (the reconciler
// reads them back and retries) and the errors.
func (dp *Dataplane) convergeLocked(goal *spec, reread kinds) (kinds, error) {
	var failed kinds
	var errs []error
	note := func(k kinds, err error) {
		if err != nil {
			failed |= k
			errs = append(errs, err)
		}
	}
	if !goal.noBridge && (reread&kBridge != 0 || dp.m.bridgeIndex == 0) {
		old := dp.m.bridgeIndex
		if err := dp.ensureBridgeLocked(); err != nil {
			return kAll, err // nothing lives without the bridge
		}
		if old != 0 && dp.m.bridgeIndex != old {
			reread |= kAll // a new bridge: read everything again
		}
	}
	dp.readLocked(reread&^kBridge, false, note)

	if goal.noBridge {
		// Its addresses and ports go with the bridge.
		dp.m.addrs, dp.m.ports = map[netip.Prefix]struct{}{}, newPorts()
	} else {
		if failed&kAddrs == 0 {
			note(kAddrs, dp.applyAddrsLocked(goal.addrs))
		}
		// The filters before the ports: a port is never enslaved unfiltered.
		if failed&kFilters == 0 {
			note(kFilters, dp.applyFiltersLocked(goal))
		}
		if failed&kPorts == 0 {
			joined, left, err := dp.applyPortsLocked(goal.ports)
			note(kPorts, err)
			note(kPorts, dp.applyHairpinLocked(goal.hairpin))
			if left || reread&(kMTU|kPorts) != 0 {
				note(kMTU, dp.syncMTULocked(nil, true))
			} else if len(joined) > 0 {
				note(kMTU, dp.syncMTULocked(joined, false))
			}
		}
	}
	for _, f := range families {
		if k := routeKind(f); failed&k == 0 {
			note(k, dp.convergeRouteLocked(goal, f))
		}
	}
	if failed&kRules == 0 {
		note(kRules, dp.applyRulesLocked(goal.vips))
	}
	if failed&kGuard == 0 {
		note(kGuard, dp.applyGuardLocked(!goal.noBridge && len(dp.opts.GuardedPorts) > 0))
	}
	if goal.noBridge {
		note(kFilters, dp.applyFiltersLocked(goal))
		note(kBridge, dp.removeBridgeLocked())
	}
	return failed, errors.Join(errs...)
}

// convergeRouteLocked makes the default route of family f go over goal's
// effective nexthops, and queues the conntrack flush of the nexthops that
// left the route because they are no longer wanted (not those only left
// out while their port is absent).
func (dp *Dataplane) convergeRouteLocked(goal *spec, f family) error {
	old := dp.m.routes[f].nexthops
	if err := dp.applyRouteLocked(f, dp.effectiveNexthopsLocked(goal, f)); err != nil {
		return err
	}
	for _, a := range old {
		if !slices.Contains(goal.nexthops[f], a) {
			dp.flush.add(dp.opts.DisableConntrackFlush, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return nil
}

// readLocked reads the kinds in ks back from the kernel into the model;
// with adopt, the ports found on the bridge become owned. It reports the
// kinds it could not read, with their errors, through note (a nil error
// when one was read).
func (dp *Dataplane) readLocked(ks kinds, adopt bool, note func(kinds, error)) {
	if ks&kAddrs != 0 {
		note(kAddrs, dp.loadAddrsLocked())
	}
	if ks&kPorts != 0 {
		note(kPorts, dp.loadPortsLocked(adopt))
	}
	for _, f := range families {
		if k := routeKind(f); ks&k != 0 {
			note(k, dp.loadRoutesLocked(f))
		}
	}
	if ks&kRules != 0 {
		note(kRules, dp.loadRulesLocked())
	}
	if ks&kFilters != 0 {
		note(kFilters, dp.loadFiltersLocked())
	}
	if ks&kGuard != 0 {
		note(kGuard, dp.loadGuardLocked())
	}
}

// startLocked is the start: it adopts or creates the bridge, removes what
// Meridio's proxy left in the table, reads what the Dataplane owns, takes that as the desired state (without the routes and
// rules of an earlier run, unless asked to adopt them) and converges to it,
// which removes those leftovers.
func (dp *Dataplane) startLocked() error {
	if err := dp.ensureBridgeLocked(); err != nil {
		return err
	}
	if err := dp.removeMeridioLeftoversLocked(); err != nil {
		return fmt.Errorf("remove Meridio's leftovers: %w", err)
	}
	if err := dp.findLeftoverFiltersLocked(); err != nil {
		return err
	}
	var errs []error
	dp.readLocked(kAll&^kBridge, true, func(_ kinds, err error) {
		if err != nil {
			errs = append(errs, err)
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	leftovers := dp.m.rules.len()
	for _, f := range families {
		if dp.m.routes[f].present {
			leftovers++
		}
	}
	dp.setGoalLocked(dp.m.adopted(dp.opts.AdoptLeftovers))
	if dp.opts.AdoptLeftovers && dp.opts.HoldLeftovers {
		dp.leftovers = dp.goal
		if err := dp.readLeftoverAddrsLocked(); err != nil {
			return err
		}
	}
	if _, err := dp.convergeLocked(dp.goal, 0); err != nil {
		return fmt.Errorf("remove leftovers: %w", err)
	}
	if leftovers > 0 && !dp.opts.AdoptLeftovers {
		dp.log.Info("removed leftovers of an earlier run", "objects", leftovers)
	}
	if len(dp.m.addrs) > 0 {
		// A restart: tell the neighbours the bridge's MAC again (Meridio
		// #466).
		dp.ann.kick()
	}
	return nil
}

// teardownLocked converges to the empty state, reading first the routes and
// rules that carry our protocol in our table (including ones this run did
// not create).
func (dp *Dataplane) teardownLocked() error {
	_, err := dp.convergeLocked(emptyState(), kRoutes4|kRoutes6|kRules|kFilters|kGuard)
	dp.m = newModel()
	return err
}

// removeBridgeLocked deletes the bridge, which releases its ports.
func (dp *Dataplane) removeBridgeLocked() error {
	dp.read()
	l, err := dp.h.LinkByName(dp.opts.BridgeName)
	if err != nil || l.Type() != "bridge" {
		return nil
	}
	if err := dp.write(opLinkDel, dp.bridgeObject(), func() error { return dp.h.LinkDel(l) }); err != nil {
		return err
	}
	dp.m.bridgeIndex = 0
	dp.bridgeIdx.Store(0)
	return nil
}
