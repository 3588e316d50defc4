// Package nodewatch frees the node subnets of nodes deleted from the
// Kubernetes cluster: it watches the cluster's Nodes and, for every node
// the IPAM holds subnets for that the cluster no longer has, asks the
// engine to free them once their leases have ended (ipam.Engine.FreeNode),
// looking again when the last of them ends. Without it such a subnet is
// kept until the collector's next run, and with a bridge whose lease its
// node's proxy renewed to the end, as long as the collector finds it
// leased. Meridio #580.
package nodewatch
