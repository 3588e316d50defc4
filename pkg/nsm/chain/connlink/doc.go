// Package connlink (the link matcher) matches the proxy's NSM
// connections with the kernel links the forwarder creates for them. The
// server and client elements record, for every established connection, its
// key (proxy.ConnKey) and the interface name the forwarder uses (kernel
// mechanism parameter "name"); the Matcher looks the names up in the one
// table of the namespace's links, the dataplane's link table (Links), and
// tells a Handler when the link of a connection has appeared
// (InterfaceCreated) or gone (InterfaceDeleted). It keeps no table of links
// of its own: a link event only says which link to look at again, and the
// table says what it is now. Nor does it keep which link it announced for
// which connection: the Handler (the proxy) is the one owner of that, and
// the Matcher asks it (InterfaceOf, InterfaceAt). It hands over only what
// the proxy does not know, the kernel link of a connection; the
// connection's addresses are the proxy's own. The link usually appears
// after the Request has returned, but may appear before it is recorded, be
// renamed into place, be deleted by the kernel while the connection lives
// on, or never appear at all before the connection is closed.
package connlink
