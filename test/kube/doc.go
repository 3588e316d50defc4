// Package kube is Causeway's end-to-end suite on a real single-node
// Kubernetes cluster (`make cluster`, scripts/cluster): it runs as root on
// the node and asserts on the cluster's objects, the node's kernel state and
// packets. Its subdirectories hold the programs of the cluster's own images
// and, as modules of their own, the cluster's tools.
package kube
