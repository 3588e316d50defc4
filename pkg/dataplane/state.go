// Package dataplane owns everything Causeway does to the Linux kernel in the
// proxy's network namespace: the bridge and its ports, the policy routing
// table with one ECMP default route per family, the `from <VIP>` rules, the
// namespace sysctls, gratuitous ARP / unsolicited neighbour advertisements,
// conntrack clean-up and the link monitor. Callers describe the desired State;
// the package computes the difference against what it owns and applies the
// fewest netlink operations.
package dataplane

import "net/netip"

// State is the desired kernel state of the proxy's namespace.
type State struct {
	// BridgeAddrs are the bridge's addresses, at most one per family, with
	// the node subnet's prefix length (e.g. 172.16.0.1/24, fd00::1/64).
	BridgeAddrs []netip.Prefix
	// Ports are the interface indexes to enslave to the bridge. Interfaces
	// that no longer exist in the kernel are ignored.
	Ports []int
	// Nexthops are the load balancers' addresses, of either family; each
	// family gets one ECMP default route over them in the table, or none
	// when it has no nexthop.
	Nexthops []netip.Addr
	// VIPs each get a rule `from <VIP> lookup <table>`.
	VIPs []netip.Prefix
}
