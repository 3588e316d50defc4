// Package lab is the root of the building blocks of Causeway's local lab: the
// sub-packages hold the network namespace topology and run state (topo), the
// in-process NSM control plane (nsmcp), the veth forwarder (vethfwd) and the
// load balancer and target stubs (lbstub, targetstub) that cmd/lab and the
// end-to-end tests assemble into a running system.
package lab
