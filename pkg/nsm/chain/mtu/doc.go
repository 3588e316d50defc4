// Package mtu owns the NSM chain elements that put a fixed MTU into the
// connection context of the proxy's connections, on the target side (server)
// and on the load-balancer side (client). NSM applies it when the mechanism
// can carry it.
package mtu
