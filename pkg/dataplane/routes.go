package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func (f family) af() int {
	if f == v6 {
		return unix.AF_INET6
	}
	return unix.AF_INET
}

func (dp *Dataplane) routeObject(f family, nhs []netip.Addr) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s default table %d proto %d", f, dp.table, dp.proto)
	if len(nhs) > 0 {
		b.WriteString(" via")
		for _, a := range nhs {
			b.WriteString(" ")
			b.WriteString(a.String())
		}
	}
	return b.String()
}

// route builds our default route of family f over nhs (one plain nexthop,
// or a multipath route).
func (dp *Dataplane) route(f family, nhs []netip.Addr) *netlink.Route {
	r := &netlink.Route{
		Family:   f.af(),
		Dst:      prefixToIPNet(f.defaultDst()),
		Table:    dp.table,
		Protocol: netlink.RouteProtocol(dp.proto),
	}
	switch len(nhs) {
	case 0:
	case 1:
		r.Gw = nhs[0].AsSlice()
		r.LinkIndex = dp.m.bridgeIndex
	default:
		for _, a := range nhs {
			r.MultiPath = append(r.MultiPath, &netlink.NexthopInfo{LinkIndex: dp.m.bridgeIndex, Gw: a.AsSlice()})
		}
	}
	return r
}

// applyRouteLocked makes the default route of family f in the table go over
// exactly target (sorted), or removes it when target is empty.
func (dp *Dataplane) applyRouteLocked(f family, target []netip.Addr) error {
	cur := &dp.m.routes[f]
	if len(target) == 0 {
		if !cur.present {
			return nil
		}
		r := dp.route(f, nil)
		err := dp.write(opRouteDel, dp.routeObject(f, nil), func() error { return dp.h.RouteDel(r) })
		if err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
			return err
		}
		*cur = routeState{}
		return nil
	}
	if cur.present && slices.Equal(cur.nexthops, target) {
		return nil
	}
	if dp.m.bridgeIndex == 0 {
		return &OpError{Op: opRouteReplace.String(), Object: dp.routeObject(f, target), Err: errors.New("no bridge")}
	}
	r := dp.route(f, target)
	if err := dp.write(opRouteReplace, dp.routeObject(f, target), func() error { return dp.h.RouteReplace(r) }); err != nil {
		return err
	}
	*cur = routeState{present: true, nexthops: slices.Clone(target)}
	return nil
}

func isDefaultRoute(r *netlink.Route) bool {
	if r.Dst == nil {
		return true
	}
	ones, _ := r.Dst.Mask.Size()
	return ones == 0
}

// routeNexthops returns the gateways of r, sorted, and whether every one of
// them goes over dev.
func routeNexthops(r *netlink.Route, dev int) ([]netip.Addr, bool) {
	var out []netip.Addr
	ok := true
	add := func(gw []byte, link int) {
		a, valid := netip.AddrFromSlice(gw)
		if !valid {
			ok = false
			return
		}
		out = append(out, a.Unmap())
		if link != dev {
			ok = false
		}
	}
	if len(r.MultiPath) > 0 {
		for _, nh := range r.MultiPath {
			add(nh.Gw, nh.LinkIndex)
		}
	} else {
		add(r.Gw, r.LinkIndex)
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out, ok
}

// listOwnRoutesLocked returns the routes of family f in the table that carry
// our protocol.
func (dp *Dataplane) listOwnRoutesLocked(f family) ([]netlink.Route, error) {
	dp.read()
	routes, err := dp.h.RouteListFiltered(f.af(), &netlink.Route{Table: dp.table}, netlink.RT_FILTER_TABLE)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return nil, fmt.Errorf("list %s routes of table %d: %w", f, dp.table, err)
	}
	out := routes[:0]
	for _, r := range routes {
		if int(r.Protocol) == dp.proto && r.Table == dp.table {
			out = append(out, r)
		}
	}
	return out, err
}

// loadRoutesLocked reads our routes of family f into the model. Routes of
// ours that are not a default route over the bridge, and duplicates, are
// removed (they can only be leftovers).
func (dp *Dataplane) loadRoutesLocked(f family) error {
	routes, err := dp.listOwnRoutesLocked(f)
	if err != nil {
		return err
	}
	var errs []error
	st := routeState{}
	for i := range routes {
		r := &routes[i]
		if isDefaultRoute(r) && !st.present {
			nhs, viaBridge := routeNexthops(r, dp.m.bridgeIndex)
			st.present = true
			if viaBridge {
				st.nexthops = nhs
			} else {
				// Wrong device: make the model differ from any target so
				// that the next convergence replaces it.
				st.nexthops = nil
			}
			continue
		}
		del := *r
		err := dp.write(opRouteDel, fmt.Sprintf("%s %v table %d proto %d (stray)", f, r.Dst, dp.table, dp.proto), func() error { return dp.h.RouteDel(&del) })
		if err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, err)
		}
	}
	dp.m.routes[f] = st
	return errors.Join(errs...)
}

// routeEventMatches tells whether a route notification agrees with the
// model (so it needs no read).
func (dp *Dataplane) routeEventMatchesLocked(u netlink.RouteUpdate) bool {
	r := &u.Route
	if r.Table != dp.table {
		return true
	}
	f := v4
	if r.Family == unix.AF_INET6 {
		f = v6
	} else if r.Family != unix.AF_INET {
		return true
	}
	cur := dp.m.routes[f]
	own := int(r.Protocol) == dp.proto
	if !own {
		// A foreign route in our table: only a replacement of the default
		// route can have taken ours away.
		return !(u.Type == unix.RTM_NEWROUTE && isDefaultRoute(r) && u.NlFlags&unix.NLM_F_REPLACE != 0 && cur.present)
	}
	if !isDefaultRoute(r) {
		return false
	}
	switch u.Type {
	case unix.RTM_NEWROUTE:
		nhs, viaBridge := routeNexthops(r, dp.m.bridgeIndex)
		return cur.present && viaBridge && slices.Equal(nhs, cur.nexthops)
	case unix.RTM_DELROUTE:
		return !cur.present
	}
	return true
}
