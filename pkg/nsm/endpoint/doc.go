// Package endpoint is the project's one NSM endpoint helper. It owns the
// proxy's NSM endpoint toward its targets: it serves the NSE chain on a unix
// socket, registers the network service (with the nodeName match that routes
// every target to the proxy of its own node) and the endpoint itself
// (labelled with its node) through the NSMgr, and unregisters the endpoint
// and stops serving on Stop. The lab's NSEs (pkg/nsm/controlplane) run on it too,
// on a fixed socket path and without the nodeName match.
package endpoint
