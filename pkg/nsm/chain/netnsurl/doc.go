// Package netnsurl provides the client and server elements that point a
// connection's kernel mechanism at a given network namespace. The SDK's
// kernel mechanism elements name the namespace of the calling thread: a
// process started inside its namespace (ip netns exec) needs nothing more,
// but a component run in-process for another namespace (tests, or a lab
// process serving several namespaces) places these elements right after the
// kernel mechanism element and before sendfd.
package netnsurl
