// Package e2e is Causeway's end-to-end suite on the lab (pkg/lab/labrun):
// every scenario brings up a fresh lab of real processes (proxy, ipam, nsp,
// LB and target stubs) in network namespaces, drives it through a failure
// the system promises to survive, asserts on traffic and kernel state, tears
// the lab down and checks that nothing of it remains. It needs root; it is
// skipped under -short. Measured figures are logged as "FIGURE:" lines.
package e2e
