package connlink

import (
	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/proxy"
)

// Handler receives interface events. *proxy.Proxy implements it. Calls are
// made one at a time, in order, from the Monitor's lock: a Handler must not
// call back into the Monitor.
type Handler interface {
	// InterfaceCreated says that the connection (Type, ConnKey)
	// has the kernel link Index (named Name).
	InterfaceCreated(iface proxy.Interface)
	// InterfaceDeleted says that the link of a connection is gone or no
	// longer belongs to it; the Interface is the one previously announced
	// by InterfaceCreated (same index).
	InterfaceDeleted(iface proxy.Interface)
}

// Links is the kernel's view of the namespace's links: the dataplane's link
// monitor, which *dataplane.Dataplane serves. The Monitor reads it and
// keeps no copy.
type Links interface {
	Link(index int) (dataplane.Link, bool)
	LinkByName(name string) (dataplane.Link, bool)
}

var _ Links = (*dataplane.Dataplane)(nil)
