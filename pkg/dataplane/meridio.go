package dataplane

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// plainSource returns the prefix of a rule whose only selector is
// `from <prefix>` (a prefix longer than /0): no destination, interface,
// mark, TOS, tunnel, flow, port, IP protocol or UID selector, no
// suppression, not inverted and not a goto.
func plainSource(r *netlink.Rule) (netip.Prefix, bool) {
	p, ok := ipNetToPrefix(r.Src)
	if !ok || p.Bits() == 0 {
		return netip.Prefix{}, false
	}
	other := r.Dst != nil || r.IifName != "" || r.OifName != "" || r.Mark != 0 || r.Mask != nil ||
		r.Tos != 0 || r.TunID != 0 || r.Flow >= 0 || r.Goto >= 0 || r.Invert ||
		r.SuppressIfgroup >= 0 || r.SuppressPrefixlen >= 0 ||
		r.Dport != nil || r.Sport != nil || r.IPProto != 0 || r.UIDRange != nil
	return p, !other
}

// isMeridioRule tells whether r has the exact shape Meridio's proxy gives
// its VIP rules: `from <VIP> lookup <our table>` and nothing else, with no
// protocol (Meridio's netlink RuleAdd sends none, so the kernel records
// RTPROT_UNSPEC). `ip rule add` without `proto` leaves the same shape: a
// rule of another owner that is to survive must carry a protocol
// (`proto static`), another selector, or point to another table.
func (dp *Dataplane) isMeridioRule(r *netlink.Rule) bool {
	_, plain := plainSource(r)
	return plain && r.Table == dp.table && r.Protocol == unix.RTPROT_UNSPEC
}

// isMeridioRoute tells whether r has the shape of Meridio's egress route:
// a default route in our table with protocol boot (Meridio's netlink
// RouteReplace leaves the library's default, RTPROT_BOOT, as `ip route add`
// does) whose every nexthop is over the bridge. Routes to other
// destinations, over other devices or with another protocol stay.
func (dp *Dataplane) isMeridioRoute(r *netlink.Route) bool {
	if r.Table != dp.table || r.Protocol != unix.RTPROT_BOOT || !isDefaultRoute(r) || dp.m.bridgeIndex == 0 {
		return false
	}
	_, viaBridge := routeNexthops(r, dp.m.bridgeIndex)
	return viaBridge
}

// removeMeridioLeftoversLocked deletes, once at start, the VIP rules and
// egress routes Meridio's proxy left in our table (Meridio never removes
// them, see isMeridioRule and isMeridioRoute), and logs one line per kind
// removed. It runs before the first read, so that the convergence then
// writes only Causeway's own layout.
func (dp *Dataplane) removeMeridioLeftoversLocked() error {
	var errs []error
	rules, err := dp.removeMeridioRulesLocked()
	if err != nil {
		errs = append(errs, err)
	}
	if len(rules) > 0 {
		dp.log.Info("Meridio leftovers removed", "kind", "rule", "shape",
			fmt.Sprintf("from <prefix> lookup %d proto unspec", dp.table), "count", len(rules), "prefixes", rules)
	}
	var routes []string
	for _, f := range families {
		rs, err := dp.removeMeridioRoutesLocked(f)
		if err != nil {
			errs = append(errs, err)
		}
		routes = append(routes, rs...)
	}
	if len(routes) > 0 {
		dp.log.Info("Meridio leftovers removed", "kind", "route", "shape",
			fmt.Sprintf("default table %d proto boot over %s", dp.table, dp.opts.BridgeName), "count", len(routes), "routes", routes)
	}
	return errors.Join(errs...)
}

// removeMeridioRulesLocked deletes the Meridio-shaped rules of our table
// and returns their prefixes.
func (dp *Dataplane) removeMeridioRulesLocked() ([]string, error) {
	dp.read()
	rules, err := dp.h.RuleListFiltered(netlink.FAMILY_ALL, &netlink.Rule{Table: dp.table}, netlink.RT_FILTER_TABLE)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return nil, fmt.Errorf("list rules of table %d: %w", dp.table, err)
	}
	var removed []string
	var errs []error
	for i := range rules {
		r := &rules[i]
		if !dp.isMeridioRule(r) {
			continue
		}
		err := dp.write(opRuleDel, fmt.Sprintf("priority %d %s (Meridio's)", r.Priority, r), func() error { return dp.h.RuleDel(r) })
		if err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, err)
			continue
		}
		p, _ := plainSource(r)
		removed = append(removed, p.String())
	}
	return removed, errors.Join(errs...)
}

// removeMeridioRoutesLocked deletes the Meridio-shaped routes of family f
// in our table and returns them, written out.
func (dp *Dataplane) removeMeridioRoutesLocked(f family) ([]string, error) {
	dp.read()
	routes, err := dp.h.RouteListFiltered(f.af(), &netlink.Route{Table: dp.table}, netlink.RT_FILTER_TABLE)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return nil, fmt.Errorf("list %s routes of table %d: %w", f, dp.table, err)
	}
	var removed []string
	var errs []error
	for i := range routes {
		r := &routes[i]
		if !dp.isMeridioRoute(r) {
			continue
		}
		nhs, _ := routeNexthops(r, dp.m.bridgeIndex)
		object := fmt.Sprintf("%s default table %d proto boot via %v", f, dp.table, nhs)
		err := dp.write(opRouteDel, object+" (Meridio's)", func() error { return dp.h.RouteDel(r) })
		if err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, object)
	}
	return removed, errors.Join(errs...)
}
