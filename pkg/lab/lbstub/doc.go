// Package lbstub owns the lab's load balancer stub: an NSE of a conduit's
// network service (<conduit>.<trench>.<ns>) that accepts the proxies'
// kernel interfaces with the addresses the proxies assign, and keeps one
// multipath route per VIP toward the targets currently published (stateless
// per-flow hashing), so that traffic from the external host reaches the
// targets and their replies, coming back through the proxy, are forwarded
// out again.
package lbstub
