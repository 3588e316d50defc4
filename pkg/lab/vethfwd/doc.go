// Package vethfwd owns the lab's NSM forwarder: an NSM endpoint that joins
// the requesting (NSC) and the serving (NSE) network namespaces of a KERNEL
// mechanism connection with a veth pair, named and placed as each side's
// mechanism says, and lets sdk-kernel's connectioncontextkernel program the
// addresses, routes, policy rules and MTU of both ends.
package vethfwd
