// Package labrun owns the assembly of Causeway's local lab: it brings the
// whole system up on one machine (Up), checks it end to end (Check), shows it
// (Status), drives its components for the end-to-end scenarios (kill and
// restart the proxy, the IPAM, the load balancers and the targets; change the
// VIPs) and tears it down (Down), also from another process or after a crash
// (Open).
//
// Layout of a run (every namespace name carries the run id, see topo):
//
//	ctl       ipam and nsp processes; veth to the proxy (198.18.0.1/30)
//	proxy     the proxy process (198.18.0.2/30 toward ctl, bridge0, ...)
//	lb-a/b    `lab lb` processes (LB stubs); veth ext0 to the external host
//	ext       the external host: client addresses on lo, one veth per LB,
//	          one multipath route per VIP over the running LBs
//	target-N  `lab target` processes (target stubs, echo on the VIPs)
//
// The NSM control plane (NSMgr, registry and the veth forwarder of pkg/nsm/controlplane)
// is the `lab nsm` process in the host namespace, serving on unix sockets in
// the run directory; every other component is a real process started with
// `ip netns exec`. All are recorded in the run state and carry the run's
// marker in their environment (topo.MarkerEnv), so that each can be killed
// like a pod and `lab down` removes them even after a crash, also one
// started just before it and not recorded yet. (The control plane runs in
// its own process rather than in the caller of Up so that a test binary
// built with -race does not carry the SDK's fd-passing library, which races
// when a peer dies.)
//
// Lab addresses stay in ranges that a machine does not use: 198.18.0.0/15
// (benchmarking) and fd5a:1ab::/32 for the infrastructure links and the
// external host, 172.30.0.0/16 and fd5a:ca5e::/48 for the IPAM pools, and
// documentation prefixes (203.0.113.0/24, 2001:db8::/32) for the VIPs.
package labrun
