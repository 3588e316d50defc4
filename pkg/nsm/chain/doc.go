// Package chain groups Causeway's own NSM chain elements, one per
// sub-package, each with its server and/or client and its options: what
// the proxy adds to the SDK's chains rather than replaces in them.
//
//   - ipcontext: a connection's addresses, from the proxy's Setter (the IPAM);
//   - mtu: a fixed MTU in the connection context;
//   - connlink: which kernel link belongs to which connection (the
//     link matcher);
//   - egress: whether the proxy has at least one load balancer connection;
//   - backoff: a growing pause between failed requests of one connection;
//   - keepmechanism: the mechanism a connection was given, kept across a
//     forwarder restart;
//   - liveness: the data-path check of the SDK's heal client;
//   - netnsurl: a kernel mechanism pointed at a given network namespace
//     (components that serve another namespace in-process: the lab's stubs,
//     tests).
//
// Elements that take the place of an SDK element are in
// pkg/nsm/sdkreplacement.
package chain
