// Package controlplane owns an in-process NSM control plane for one machine: an
// NSMgr with its embedded memory registry and the veth forwarder
// (pkg/forwarder), served on unix sockets in a run directory, plus the
// insecure-local credentials and the serving, client and registration
// helpers that the components around a proxy (load balancer and target
// stubs, test endpoints) use to talk to it. The lab (pkg/lab) runs on it,
// and so do the proxy binary's process tests (cmd/proxy), which must not
// import the lab.
package controlplane
