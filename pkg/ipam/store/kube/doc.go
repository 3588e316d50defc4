// Package kube is a store.Store on the Kubernetes API: the IPAM's records
// kept in custom resources of the group ipam.causeway.net, one IPAMPool per
// trench and family (the pool, its heartbeat, the replica serving it and the
// index of its conduit and node subnets) and one IPAMBlock per node subnet
// (the node's lease and every child address in it).
//
// Every write is conditional: an update or delete names the resourceVersion
// the store read or last wrote, a new object is created and fails if it
// exists. A write that finds the object changed by someone else fences the
// store: every later Apply fails with ErrFenced and Fenced is closed, so
// that its owner stops serving and loads the store again. The design and
// the argument that this keeps a deposed replica from handing out an address
// another one hands out are in docs/ipam-store.md.
package kube
