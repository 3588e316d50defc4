// Package leader runs the IPAM as one of several replicas sharing a
// Kubernetes store (pkg/ipam/store/kube): a replica serves only while it
// holds a coordination.k8s.io Lease and its store is not fenced; otherwise
// every call gets gRPC Unavailable. Gate is what the gRPC server, the
// conduit watch and the metrics see; Elect runs the election and the
// engine's life under it. docs/ipam-store.md has the design.
package leader
