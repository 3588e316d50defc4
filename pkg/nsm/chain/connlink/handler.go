package connlink

import (
	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/proxy"
)

// Handler receives interface events, and is the one owner of which link
// belongs to which connection: the Matcher asks it (InterfaceOf,
// InterfaceAt) rather than keep a copy. *proxy.Proxy implements it. Calls
// are made one at a time, in order, from the Matcher's lock: a Handler must
// not call back into the Matcher.
type Handler interface {
	// InterfaceCreated says that the connection (Type, ConnKey) has the
	// kernel link Index (named Name). The Matcher announces a link for one
	// connection at a time, and a connection on one link.
	InterfaceCreated(iface proxy.Interface)
	// InterfaceDeleted says that the link of a connection is gone or no
	// longer belongs to it; the Interface is the one previously announced
	// by InterfaceCreated (same index).
	InterfaceDeleted(iface proxy.Interface)
	// InterfaceOf returns the interface announced for the connection of
	// type t with key key and not deleted since.
	InterfaceOf(t proxy.ConnType, key string) (proxy.Interface, bool)
	// InterfaceAt returns the interface announced on link index and not
	// deleted since.
	InterfaceAt(index int) (proxy.Interface, bool)
}

// Links is the kernel's view of the namespace's links: the dataplane's link
// matcher, which *dataplane.Dataplane serves. The Matcher reads it and
// keeps no copy.
type Links interface {
	Link(index int) (dataplane.Link, bool)
	LinkByName(name string) (dataplane.Link, bool)
}

var _ Links = (*dataplane.Dataplane)(nil)
