// The Kubernetes end-to-end suite and the programs of its cluster's images.
// A module of its own: Kubernetes' dependencies never reach the binaries.
module github.com/causeway-net/causeway/test/kube

go 1.26
