// Package interfacemonitor owns the correlation between the proxy's NSM
// connections and the kernel links the forwarder creates for them. The
// server and client elements record, for every established connection, the
// interface name the forwarder will use (kernel mechanism parameter "name")
// together with the connection's addresses; the Monitor consumes kernel link
// events and tells a Handler when the interface of a connection has appeared
// (InterfaceCreated) or gone (InterfaceDeleted). The link usually appears
// after the Request has returned, but may appear before it is recorded, be
// renamed into place, be deleted by the kernel while the connection lives on,
// or never appear at all before the connection is closed.
package interfacemonitor
