// Package keepmechanism provides the server element that keeps the mechanism a
// connection was given. A forwarder that restarted has lost the mechanism
// it negotiated with this endpoint, and its next refresh asks with
// preferences only; without this element the endpoint's kernel mechanism
// would pick a new interface name and the forwarder would replace a
// working veth, cutting the data path for nothing. With it, the refresh
// names the same interface and the forwarder can take the existing one
// over. It needs a metadata element before it and goes before the
// mechanisms element.
package keepmechanism
