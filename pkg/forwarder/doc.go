// Package forwarder owns Causeway's NSM forwarder: an NSM endpoint that joins
// the requesting (NSC) and the serving (NSE) network namespaces of a KERNEL
// mechanism connection with a veth pair, named and placed as each side's
// mechanism says, and lets sdk-kernel's connectioncontextkernel program the
// addresses, routes, policy rules and MTU of both ends. The lab's control
// plane (pkg/nsm/controlplane) and the tests' NSM sandbox (pkg/nsm/nsmtest) run
// it; its own chain elements are the sub-packages dumpretry (a request failed
// by an interrupted netlink dump is run again) and findretry (a registry
// listing that broke before its end is listed again).
package forwarder
