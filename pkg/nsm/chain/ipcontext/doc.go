// Package ipcontext owns the NSM chain elements that give the proxy's
// connections their addresses: the server side (connections from targets)
// and the client side (connections to load balancers) ask a Setter to fill
// the connection's IP context before the request travels on, and to release
// it when the connection is closed or when a new connection could not be
// established.
package ipcontext
