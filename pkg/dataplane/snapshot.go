package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
)

// Snapshot is a JSON-able dump of the kernel state the Dataplane manages,
// read from the kernel (not from the model), with the desired state next to
// it, for debugging (the proxy's -debug flag).
type Snapshot struct {
	Bridge   BridgeSnapshot `json:"bridge"`
	Ports    []Link         `json:"ports"`
	Table    int            `json:"table"`
	Protocol int            `json:"protocol"`
	// Routes are all the routes of the table; Owned marks ours.
	Routes []RouteSnapshot `json:"routes"`
	// Rules are all the rules pointing to the table; Owned marks ours.
	Rules []RuleSnapshot `json:"rules"`
	// Desired is the last applied State (nil before the first Apply),
	// with the held leftovers added while there are any.
	Desired *State `json:"desired,omitempty"`
	// Held are the leftovers of an earlier run held beside it (see
	// Options.HoldLeftovers), until they are released.
	Held *State `json:"held,omitempty"`
	// EffectiveNexthops are the nexthops that belong in the routes now:
	// the desired ones minus those tied to an absent port.
	EffectiveNexthops []netip.Addr `json:"effectiveNexthops"`
	// AbsentPorts are desired ports that do not exist in the kernel.
	AbsentPorts []int             `json:"absentPorts,omitempty"`
	Sysctls     map[string]string `json:"sysctls"`
	// SysctlErrors are the sysctls New could not set.
	SysctlErrors []string `json:"sysctlErrors,omitempty"`
	Stats        Stats    `json:"stats"`
}

// BridgeSnapshot describes the bridge.
type BridgeSnapshot struct {
	Name      string         `json:"name"`
	Index     int            `json:"index"`
	MAC       string         `json:"mac"`
	MTU       int            `json:"mtu"`
	Up        bool           `json:"up"`
	OperState string         `json:"operState"`
	Addrs     []netip.Prefix `json:"addrs"`
}

// RouteSnapshot describes one route.
type RouteSnapshot struct {
	Family   string            `json:"family"`
	Dst      netip.Prefix      `json:"dst"`
	Protocol int               `json:"protocol"`
	Metric   int               `json:"metric,omitempty"`
	Owned    bool              `json:"owned"`
	Nexthops []NexthopSnapshot `json:"nexthops"`
}

// NexthopSnapshot is one nexthop of a route.
type NexthopSnapshot struct {
	Via   netip.Addr `json:"via"`
	Dev   string     `json:"dev,omitempty"`
	Index int        `json:"index"`
}

// RuleSnapshot describes one rule.
type RuleSnapshot struct {
	Family   string       `json:"family"`
	Priority int          `json:"priority"`
	From     netip.Prefix `json:"from"`
	Table    int          `json:"table"`
	Protocol int          `json:"protocol"`
	Owned    bool         `json:"owned"`
}

// Snapshot reads the managed kernel state.
func (dp *Dataplane) Snapshot() (Snapshot, error) {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.closed {
		return Snapshot{}, ErrClosed
	}
	s := Snapshot{Table: dp.table, Protocol: dp.proto, Sysctls: map[string]string{}, Stats: dp.Stats()}
	errs := dp.snapshotBridgeLocked(&s)
	for _, f := range families {
		routes, err := dp.snapshotRoutesLocked(f)
		if err != nil {
			errs = append(errs, err)
		}
		s.Routes = append(s.Routes, routes...)
	}
	rules, err := dp.snapshotRulesLocked()
	if err != nil {
		errs = append(errs, err)
	}
	s.Rules = rules
	dp.snapshotDesiredLocked(&s)
	dp.snapshotSysctlsLocked(&s)
	return s, errors.Join(errs...)
}

// snapshotBridgeLocked fills the bridge, its addresses and its ports into s
// and returns what it could not read.
func (dp *Dataplane) snapshotBridgeLocked(s *Snapshot) []error {
	var errs []error
	dp.read()
	br, err := dp.h.LinkByName(dp.opts.BridgeName)
	if err != nil {
		return append(errs, fmt.Errorf("bridge: %w", err))
	}
	l := toLink(br)
	s.Bridge = BridgeSnapshot{Name: l.Name, Index: l.Index, MAC: l.HardwareAddr, MTU: l.MTU, Up: l.Up, OperState: l.OperState}
	dp.read()
	addrs, err := dp.h.AddrList(br, netlink.FAMILY_ALL)
	if err != nil {
		errs = append(errs, fmt.Errorf("bridge addresses: %w", err))
	}
	for _, a := range addrs {
		if p, ok := ipNetToPrefix(a.IPNet); ok {
			s.Bridge.Addrs = append(s.Bridge.Addrs, p)
		}
	}
	slices.SortFunc(s.Bridge.Addrs, netip.Prefix.Compare)
	dp.read()
	links, err := dp.h.LinkList()
	if err != nil {
		errs = append(errs, fmt.Errorf("links: %w", err))
	}
	for _, nl := range links {
		if nl.Attrs().MasterIndex == l.Index {
			s.Ports = append(s.Ports, toLink(nl))
		}
	}
	slices.SortFunc(s.Ports, func(a, b Link) int { return a.Index - b.Index })
	return errs
}

// snapshotRoutesLocked reads the routes of family f in the table, along with
// any error other than an interrupted dump.
func (dp *Dataplane) snapshotRoutesLocked(f family) ([]RouteSnapshot, error) {
	var out []RouteSnapshot
	var errOut error
	dp.read()
	routes, err := dp.h.RouteListFiltered(f.af(), &netlink.Route{Table: dp.table}, netlink.RT_FILTER_TABLE)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		errOut = fmt.Errorf("%s routes: %w", f, err)
	}
	for i := range routes {
		out = append(out, dp.routeSnapshot(f, &routes[i]))
	}
	return out, errOut
}

// routeSnapshot describes route r of family f.
func (dp *Dataplane) routeSnapshot(f family, r *netlink.Route) RouteSnapshot {
	rs := RouteSnapshot{Family: f.String(), Protocol: int(r.Protocol), Metric: r.Priority, Owned: int(r.Protocol) == dp.proto}
	if p, ok := ipNetToPrefix(r.Dst); ok {
		rs.Dst = p
	} else {
		rs.Dst = f.defaultDst()
	}
	if len(r.MultiPath) > 0 {
		for _, nh := range r.MultiPath {
			rs.Nexthops = append(rs.Nexthops, dp.nexthopSnapshot(nh.Gw, nh.LinkIndex))
		}
	} else {
		rs.Nexthops = append(rs.Nexthops, dp.nexthopSnapshot(r.Gw, r.LinkIndex))
	}
	return rs
}

// nexthopSnapshot describes the nexthop via gw on the link with index idx.
func (dp *Dataplane) nexthopSnapshot(gw []byte, idx int) NexthopSnapshot {
	a, _ := netip.AddrFromSlice(gw)
	nh := NexthopSnapshot{Via: a.Unmap(), Index: idx}
	if l, ok := dp.linkTable.link(idx); ok {
		nh.Dev = l.Name
	}
	return nh
}

// snapshotRulesLocked reads the rules pointing to the table, along with any
// error other than an interrupted dump.
func (dp *Dataplane) snapshotRulesLocked() ([]RuleSnapshot, error) {
	var out []RuleSnapshot
	var errOut error
	dp.read()
	rules, err := dp.h.RuleListFiltered(netlink.FAMILY_ALL, &netlink.Rule{Table: dp.table}, netlink.RT_FILTER_TABLE)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		errOut = fmt.Errorf("rules: %w", err)
	}
	for _, r := range rules {
		rs := RuleSnapshot{Family: "ipv4", Priority: r.Priority, Table: r.Table, Protocol: int(r.Protocol), Owned: int(r.Protocol) == dp.proto}
		if r.Family == v6.af() {
			rs.Family = "ipv6"
		}
		if p, ok := ipNetToPrefix(r.Src); ok {
			rs.From = p
		}
		out = append(out, rs)
	}
	return out, errOut
}

// snapshotDesiredLocked fills the desired state, the absent ports and the
// effective nexthops into s.
func (dp *Dataplane) snapshotDesiredLocked(s *Snapshot) {
	if dp.leftovers != nil {
		h := dp.leftovers.state()
		s.Held = &h
	}
	if dp.applied != nil {
		st := dp.goal.state()
		s.Desired = &st
		for idx, ps := range dp.m.ports.all() {
			if ps.absent {
				s.AbsentPorts = append(s.AbsentPorts, idx)
			}
		}
	}
	for _, f := range families {
		s.EffectiveNexthops = append(s.EffectiveNexthops, dp.effectiveNexthopsLocked(dp.goal, f)...)
	}
}

// snapshotSysctlsLocked fills the current sysctl values and the sysctls New
// could not set into s.
func (dp *Dataplane) snapshotSysctlsLocked(s *Snapshot) {
	readSysctls(dp.ns, "", dp.opts.SysctlFamilies.filter(globalSysctls()), s.Sysctls)
	if dp.opts.BridgeNetfilter {
		readSysctls(dp.ns, "", bridgeNetfilterSysctls(), s.Sysctls)
	}
	if dp.opts.EchoSockets {
		readSysctls(dp.ns, "", echoSocketSysctls(), s.Sysctls)
	}
	readSysctls(dp.ns, dp.opts.BridgeName, dp.opts.SysctlFamilies.filter(ownBridgeSysctls(dp.opts.BridgeName)), s.Sysctls)
	for _, e := range dp.sysctlErrs {
		s.SysctlErrors = append(s.SysctlErrors, e.Error())
	}
}
