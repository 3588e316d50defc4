// Package dataplane owns everything Causeway does to the Linux kernel in the
// proxy's network namespace: the bridge and its ports (and their hairpin
// mode, and the filter that holds a target's port to its own MAC and
// addresses: the nftables table of the bridge family PortFilterTable), the
// guard that keeps the bridge from the namespace's own listeners (the inet
// table GuardTable), the policy routing table with one ECMP default route per family,
// the `from <VIP>` rules, the namespace sysctls (bridge netfilter included,
// for the service load balancer), the kernel's gratuitous ARP / unsolicited
// neighbour advertisements for the bridge's addresses, conntrack clean-up,
// the deletion of links that connections left behind, and the link table.
// Callers describe the desired State; the package computes the difference
// against what it owns and applies the fewest netlink operations (see One
// way in). The one
// thing in the namespace it does not own is the service load balancer's
// nftables table, with the conntrack entries of the flows that table
// translated: its provider (pkg/servicelb/nftlb, pkg/servicelb/userspace)
// creates, syncs and removes the table, and flushes those entries (with
// pkg/conntrackflush).
//
// # Model
//
// A Dataplane keeps an internal model of what it owns in the kernel, and
// changes what it owns through one operation only (the acts listed below
// aside): converge to a desired state, with one diff per kind of object
// against the model, in one order (bridge, addresses, ports with their
// hairpin mode and MTU, routes, rules, and the bridge's removal for the
// empty state). Start converges to what it found (without the
// leftovers of an earlier run), Apply to the State it is given, a repair to
// the applied state again after reading back what a kernel event showed
// diverged, and Teardown to the empty state. An identical Apply issues no
// netlink operation and reads nothing; a changed one costs its change plus
// one pass over the State. Kernel events (link, address, route and rule
// notifications) are compared against the model: a link that comes or goes
// updates it at once (a failover rewrites the route without a read), a port
// whose notification disagrees is read back alone, and another disagreement
// marks its kind to be read back; repairs that read are rate limited. A
// periodic resync (Options.ResyncInterval) is the backstop for anything an
// event could not tell. The conntrack entries of the VIPs and nexthops a
// convergence removed are flushed at its end, in one pass over the table.
//
// # One way in
//
// Its owner changes the kernel through Apply alone, with the whole desired
// State: each port with its attributes (Port: hairpin mode, the nexthops
// tied to it, the addresses its connection claims, its filter), decided
// once by the caller; the links to delete (State.Remove: a closed connection's
// leftover link, a link a heal replaced) and the end of the hold on an
// earlier run's state (State.ReleaseLeftovers) are part of it. Teardown
// (the empty state) and Close end it. Besides the convergence, the package
// writes the kernel in these places only, each for something that is an
// act rather than a state to keep, and each called from inside the package
// only: New sets the sysctls once (and a created bridge's), and replaces
// the guard of the namespace's own ports whole (Options.GuardedPorts,
// guard.go; from then on the convergence keeps it, like the rest); the start
// deletes Meridio's leftovers once (meridio.go), objects without our
// protocol that the convergence never looks at; Apply, before it
// converges, deletes the links of State.Remove (links.go:
// removeLinksLocked), the held links a port's claims supersede and, with
// State.ReleaseLeftovers, the held links nothing claimed (held.go:
// supersedeLeftoversLocked, deleteLeftoverLocked; dataplane.go:
// releaseLeftoversLocked): a link that must go once is not a state to
// restore; an announcement round sets the bridge's MAC to its own value
// and puts back the permanent neighbour entries the kernel flushes then
// (announce.go); moved nexthops' dynamic neighbour entries, a cache, are
// deleted (neighbors.go: forgetNeighborsLocked); and the conntrack entries
// of removed VIPs and nexthops are flushed (conntrack.go; FlushConntrack
// and FlushConntrackPrefix are exported for tests and tools, and no
// product package calls them). All but the conntrack flush (entries, not
// owned objects) run under the Dataplane's lock, as the convergence does.
// See docs/dataplane.md.
//
// # Ownership
//
// Every route and rule the package creates carries the rtnetlink protocol
// number Options.Protocol (default ProtocolCauseway, 202). On start the
// package removes the routes and rules of its table that carry that protocol
// (leftovers of an earlier run; with Options.AdoptLeftovers the first Apply
// replaces them instead, without a gap) and nothing else: rules and routes
// of other owners in the same table stay. Before that, the start removes
// once what Meridio's proxy left in the table, recognised by its exact
// shape: rules whose only selector is `from <prefix>`, with no protocol
// (RTPROT_UNSPEC, what Meridio's netlink RuleAdd leaves), and default routes
// over the bridge with protocol boot (what its RouteReplace leaves); rules
// with a protocol or another selector, other routes and other tables stay
// (see docs/moving-from-meridio.md). The bridge is the package's own: its
// addresses (other than IPv6 link-local ones) and its ports are exactly the
// ones asked for after the first Apply; ports and addresses found on an
// adopted bridge are kept until then.
//
// # Namespaces
//
// All kernel access goes through netlink sockets opened in Options.NetNS, and
// sysctls are read and written on an OS thread switched into that
// namespace, so one process can drive several namespaces at once (the tests
// do).
package dataplane

import "net/netip"

// State is the desired kernel state of the proxy's namespace, whole: Apply
// is the one way to change the kernel, and everything a caller wants done
// there is in it, the links to delete and the end of the hold on an earlier
// run's state included. A link index reaches it in two places only: a port
// (with all that is said of it) and a link to remove.
type State struct {
	// BridgeAddrs are the bridge's addresses, at most one per family, with
	// the node subnet's prefix length (e.g. 172.16.0.1/24, fd00::1/64).
	BridgeAddrs []netip.Prefix `json:"bridgeAddrs"`
	// Ports are the links to enslave to the bridge, each with its
	// attributes, one entry per link. Interfaces that no longer exist in
	// the kernel are ignored.
	Ports []Port `json:"ports"`
	// Nexthops are the load balancers' addresses, of either family; each
	// family gets one ECMP default route over them in the table, or none
	// when it has no nexthop. A nexthop that a port names (Port.Nexthops)
	// is tied to it.
	Nexthops []netip.Addr `json:"nexthops"`
	// VIPs each get a rule `from <VIP> lookup <table>`.
	VIPs []netip.Prefix `json:"vips"`

	// Remove are links that must go: the links connections had before a
	// heal moved them to new ones (their forwarder, if it is gone, would
	// not delete them, and the connection's addresses would sit on two
	// links), and the links closed connections left behind (whose
	// addresses are about to be handed back). Apply deletes each one that
	// still exists under its name and is neither a port of the State nor
	// the bridge, before it converges, and returns a failure: a link that
	// must go once is not a state to restore, and its caller must know it
	// gone. A request for this Apply: a caller drops an entry once an Apply
	// that carried it succeeded.
	Remove []LinkRef `json:"remove,omitempty"`
	// ReleaseLeftovers ends the hold on what New adopted
	// (Options.HoldLeftovers): from this Apply on, the kernel is made equal
	// to the State alone; a held link that no port claimed (Port.Claims)
	// carried a connection of the earlier run that did not come back, and
	// is deleted with its addresses. A held link that cannot be deleted
	// stays held and the Apply fails; the next Apply with ReleaseLeftovers
	// tries again. Without a hold it changes nothing.
	ReleaseLeftovers bool `json:"releaseLeftovers,omitempty"`
}

// Port is one link to enslave to the bridge and what the State says of it
// (hairpin mode, tied nexthops, claimed addresses, filter), decided once
// by the caller, in one place.
type Port struct {
	// Index is the link's interface index.
	Index int `json:"index"`
	// Hairpin turns the port's hairpin mode on: a frame may leave the
	// bridge by the port it came in. The service load balancer's nftables
	// provider needs it on the targets' ports, since a target may be the
	// endpoint its own request is sent to. The Dataplane turns it off again
	// on the ports it turned it on for once they lose it; a port found in
	// hairpin mode on an adopted bridge keeps it until a State names it.
	Hairpin bool `json:"hairpin,omitempty"`
	// Nexthops are the load balancer addresses (of State.Nexthops) reached
	// through this port alone. While the port does not exist in the
	// kernel, they are left out of the ECMP route: when the port's link is
	// deleted the Dataplane rewrites the route at once, from its link
	// table, without waiting for the caller's next Apply (a failover takes
	// about a millisecond instead of a control-plane round trip).
	// Nexthops no port names are always in the route; an address named by
	// two ports is tied to the first. Addresses that are not in
	// State.Nexthops are ignored.
	Nexthops []netip.Addr `json:"nexthops,omitempty"`
	// Claims are the addresses of the connection that came up on the port.
	// While the leftovers of an earlier run are held
	// (Options.HoldLeftovers), Apply deletes each held link that carried
	// one of them, other than this port: the connection came back on a new
	// link, and its old one would carry its addresses twice. A held link
	// that cannot be deleted stays held until ReleaseLeftovers.
	Claims []netip.Addr `json:"claims,omitempty"`
	// Filter, when set, holds the port to its own MAC and addresses (see
	// PortFilter); the State's VIPs are allowed sources on every filtered
	// port. Ports without one (the load balancers') are not filtered.
	Filter *PortFilter `json:"filter,omitempty"`
}

// LinkRef names a link: its index, and the name it had when the caller
// knew it (an index that names another link now is not that link).
type LinkRef struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
}
