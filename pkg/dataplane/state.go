// Package dataplane owns everything Causeway does to the Linux kernel in the
// proxy's network namespace: the bridge and its ports (and their hairpin
// mode, and the filter that holds a target's port to its own MAC and
// addresses: the nftables table of the bridge family PortFilterTable), the policy routing table with one ECMP default route per family,
// the `from <VIP>` rules, the namespace sysctls (bridge netfilter included,
// for the service load balancer), the kernel's gratuitous ARP / unsolicited
// neighbour advertisements for the bridge's addresses, conntrack clean-up,
// the deletion of links that connections left behind, and the link table.
// Callers describe the desired State; the package computes the difference
// against what it owns and applies the fewest netlink operations. The one
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
// Besides the convergence, the package changes the kernel in these places
// only, each for something that is an act rather than a state to keep:
// New sets the sysctls once (and a created bridge's); the start deletes
// Meridio's leftovers once (meridio.go), objects without our protocol that
// the convergence never looks at; Apply deletes, before it converges, the
// links a State retires or whose addresses it claims from held leftovers
// (links.go, held.go), and ReleaseLeftovers the held links nothing claimed:
// a link that must go once is not a state to restore; RemoveLink deletes a
// closed connection's leftover link at once, because its caller must know
// it gone before it hands the addresses back; an announcement round sets
// the bridge's MAC to its own value and puts back the permanent neighbour
// entries the kernel flushes then (announce.go); moved nexthops' dynamic
// neighbour entries, a cache, are deleted (neighbors.go); and conntrack
// entries are flushed. All but the conntrack flush (entries, not owned
// objects) run under the Dataplane's lock, as the convergence does. See
// docs/dataplane.md.
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

// State is the desired kernel state of the proxy's namespace.
type State struct {
	// BridgeAddrs are the bridge's addresses, at most one per family, with
	// the node subnet's prefix length (e.g. 172.16.0.1/24, fd00::1/64).
	BridgeAddrs []netip.Prefix `json:"bridgeAddrs"`
	// Ports are the interface indexes to enslave to the bridge. Interfaces
	// that no longer exist in the kernel are ignored.
	Ports []int `json:"ports"`
	// Nexthops are the load balancers' addresses, of either family; each
	// family gets one ECMP default route over them in the table, or none
	// when it has no nexthop.
	Nexthops []netip.Addr `json:"nexthops"`
	// VIPs each get a rule `from <VIP> lookup <table>`.
	VIPs []netip.Prefix `json:"vips"`

	// NexthopPorts optionally ties a nexthop to the port (interface index)
	// its load balancer is reached through. While a tied port does not exist
	// in the kernel, its nexthops are left out of the ECMP route: when the
	// port's link is deleted the Dataplane rewrites the route at once, from
	// its link table, without waiting for the caller's next Apply (a
	// failover takes about a millisecond instead of a control-plane round
	// trip). Nexthops without an entry are always in the route. Entries for
	// addresses that are not in Nexthops are ignored.
	NexthopPorts map[netip.Addr]int `json:"nexthopPorts"`

	// HairpinPorts are the ports whose hairpin mode is on: a frame may
	// leave the bridge by the port it came in. The service load balancer's
	// nftables provider needs it on the targets' ports, since a target may
	// be the endpoint its own request is sent to. The Dataplane turns it
	// off again on the ports it turned it on for once they leave this
	// list; a port found in hairpin mode on an adopted bridge keeps it.
	// Entries that are not Ports are ignored.
	HairpinPorts []int `json:"hairpinPorts,omitempty"`

	// PortFilters hold target ports to their own MAC and addresses (see
	// PortFilter); the VIPs are allowed sources on every filtered port.
	// Ports without one (the load balancers') are not filtered. Entries
	// that are not Ports are ignored by the bridge but kept by the table.
	PortFilters []PortFilter `json:"portFilters,omitempty"`

	// Retired are links that connections had before a heal moved them to
	// new ones. Apply deletes each one that still exists under its name
	// and is neither a port of the State nor the bridge: its forwarder, if
	// it is gone, would not, and the connection's addresses would sit on
	// two links. A request for this Apply only: later convergences do
	// not repeat it, and a failure is logged, not returned.
	Retired []LinkRef `json:"retired,omitempty"`
	// Claims are the addresses of connections that came up on a port.
	// While the leftovers of an earlier run are held
	// (Options.HoldLeftovers), Apply deletes each held port that carried
	// one of them, other than the claiming port: the connection came back
	// on a new link, and its old one would carry its addresses twice. A
	// held link that cannot be deleted stays held until ReleaseLeftovers.
	// A request for this Apply only, like Retired.
	Claims []Claim `json:"claims,omitempty"`
}

// LinkRef names a link: its index, and the name it had when the caller
// knew it (an index that names another link now is not that link).
type LinkRef struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
}

// Claim says that the connection on port Port holds the addresses Addrs.
type Claim struct {
	Port  int          `json:"port"`
	Addrs []netip.Addr `json:"addrs"`
}
