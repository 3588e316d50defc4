// Package proxy is the proxy's state machine: it assigns addresses from the
// IPAM to NSM connections (IP contexts), turns interface events into bridge
// ports and ECMP nexthops, keeps the VIP rules, and releases addresses after a
// cancellable delay. It drives the kernel only through pkg/dataplane: every
// change patches the desired ports and nexthops it keeps (at the cost of the
// change) and a single syncer goroutine applies the desired dataplane.State
// (serialized; changes made during an Apply coalesce into the next one). An
// interface event brings only the kernel link of a connection: the nexthops
// of an LB's link are the proxy's own allocations for it.
//
// It keeps Meridio's contracts (child names, which side gets which address,
// the key of a target connection, the rewrite of stale target contexts, the
// delayed release) and differs where Meridio has known problems:
//
//   - IPAM calls are not made under one global lock: requests for different
//     connections run in parallel, requests for one connection id are
//     serialized, and the families of one request are allocated in parallel.
//   - A failed request releases the allocations it created (never those that
//     existed before it, which an interface may be using).
//   - UnsetIPContext never waits for the IPAM; Close forces the pending
//     releases in parallel, bounded by its context.
//   - Bridge addresses are allocated in a fixed family order without
//     duplicates, and the renewal follows the IPAM's answer: if the address
//     changes, the bridge (through the dataplane), the gateways handed to new
//     targets and the policy routes of refreshed ones follow. A request whose
//     allocation falls outside the bridge's subnet triggers the renewal at
//     once.
//   - VIPs are validated (prefix, not a default route, not overlapping the
//     node subnet); the dataplane flushes the conntrack entries of the
//     VIPs it removes.
package proxy
