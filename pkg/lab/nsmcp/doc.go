// Package nsmcp owns the lab's in-process NSM control plane: an NSMgr with its
// embedded memory registry and the veth forwarder, served on unix sockets in
// the lab's run directory, plus the insecure-local credentials and serving and
// registration helpers that every lab component (proxy excluded) uses to talk
// to it.
package nsmcp
