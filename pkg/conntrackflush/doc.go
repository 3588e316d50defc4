// Package conntrackflush owns the deletion of conntrack entries in a network
// namespace: one streamed dump of the table, filtered in process by the
// entries' addresses (and by a caller's match), then one delete per entry
// (FlushMatching). A Flusher does it for a set of prefixes over a
// connection it dials when first needed and dials again after a failed
// delete; Interface is what its users hold, and Fake stands in for it in
// tests. What to flush and when is its users' to decide: the dataplane
// flushes the VIPs and nexthops it removed, the service load balancer's
// providers the UDP flows of removed services and endpoints.
package conntrackflush
