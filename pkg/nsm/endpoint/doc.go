// Package endpoint owns the proxy's NSM endpoint toward its targets: it
// serves the NSE chain on a unix socket, registers the network service (with
// the nodeName match that routes every target to the proxy of its own node)
// and the endpoint itself (labelled with its node) through the NSMgr, and
// unregisters the endpoint and stops serving on Stop.
package endpoint
