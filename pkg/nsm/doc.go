// Package nsm is the root of Causeway's Network Service Mesh code, grouped
// by role:
//
//   - chain: Causeway's own chain elements, one per package, that the
//     SDK has no equivalent of (addresses, MTU, the link of a connection, a
//     pause between failed requests, the liveness check of heal, ...);
//   - sdkreplacement: elements that stand in for an SDK element of the same
//     role in our chains (authorize, timeout, monitor and sendfd servers),
//     each package saying what it fixes or saves;
//   - the assemblies that put chains together and run them: endpoint (the
//     proxy's NSE toward its targets, served and registered), fullmesh (one
//     connection to every load balancer), registration (an endpoint kept
//     registered) and registryclient (the registry client chains);
//   - support: credentials (SPIFFE mutual TLS and NSM tokens) and nsmlog
//     (the SDK's logger on log/slog).
//
// The elements that only the veth forwarder uses live with it, in
// pkg/forwarder.
package nsm
