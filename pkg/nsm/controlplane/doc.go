// Package controlplane owns an in-process NSM control plane for one node: an
// NSMgr and the project's forwarder (pkg/forwarder), served on unix sockets
// in a run directory, plus the insecure-local credentials and the serving,
// client and registration helpers that the components around a proxy (load
// balancer and target stubs, test endpoints) use to talk to it. Alone on
// its machine the NSMgr keeps its own registry; as one node of several it
// uses a registry the nodes share (StartRegistry), is served on TCP too,
// and its forwarder reaches the other nodes over VXLAN. The lab (pkg/lab)
// runs on it, and so do the proxy binary's process tests (cmd/proxy), which
// must not import the lab.
package controlplane
