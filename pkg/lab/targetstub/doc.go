// Package targetstub owns the lab's target stub: a TAPA-like NSM client of
// the proxy's network service that carries the conduit's VIPs as source
// addresses with a policy route via the proxy's bridge (the gateway handed
// out in ExtraPrefixes), publishes its own address for the load balancer
// stubs, and answers TCP and UDP on the VIPs with its name.
package targetstub
