// Package ipam is Causeway's IPAM: an engine that carves, per address family,
// a trench pool into conduit subnets, conduit subnets into node subnets and
// node subnets into single-address children; the gRPC ipam.v1.Ipam adapter in
// front of it; the watcher that follows the conduits of the configuration
// server (nsp.v1 WatchConduit); and the engine's Prometheus metrics.
//
// Nothing that is still leased is handed out again: a conduit the
// configuration server drops is drained (its allocations kept and renewed,
// none added) until its last lease ends, and revived whole if it returns.
//
// Reads and renewals are served from an in-memory index guarded by one lock
// per tree level instance (trench, conduit, node); no lock is held across
// I/O. Changes are queued in order to a single writer that commits all queued
// changes in one store transaction (group commit). A new allocation is
// acknowledged only once its transaction is durable; lease renewals update
// memory only and are persisted write-behind every LeaseFlushInterval.
package ipam
