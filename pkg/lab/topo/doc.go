// Package topo owns the lab's kernel topology: named network namespaces with
// a per-run prefix, veth links between them, sysctls, running code inside a
// namespace, and the run state directory that records everything a run made
// so that teardown can remove it even after a crash.
package topo
