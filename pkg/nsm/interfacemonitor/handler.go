package interfacemonitor

import "github.com/causeway-net/causeway/pkg/proxy"

// Handler receives interface events. *proxy.Proxy implements it. Calls are
// made one at a time, in order, from the Monitor's lock: a Handler must not
// call back into the Monitor.
type Handler interface {
	// InterfaceCreated says that the link of a connection exists, with its
	// index, and carries the connection's addresses. It is called again,
	// after an InterfaceDeleted, when the link or the addresses change.
	InterfaceCreated(iface proxy.Interface)
	// InterfaceDeleted says that the link of a connection is gone or no
	// longer belongs to it; the Interface is the one previously announced
	// by InterfaceCreated (same index).
	InterfaceDeleted(iface proxy.Interface)
}

// LinkEvent is a kernel link event in the proxy's network namespace. A
// source must first report the links that already exist (as non-deleted
// events), then every new link, rename (same index, new name) and delete.
type LinkEvent struct {
	Index   int
	Name    string
	Deleted bool
}
