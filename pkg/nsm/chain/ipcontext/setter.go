package ipcontext

import (
	"context"

	"github.com/networkservicemesh/api/pkg/api/networkservice"

	"github.com/causeway-net/causeway/pkg/proxy"
)

// Setter assigns and releases the addresses of a connection. *proxy.Proxy
// implements it.
type Setter interface {
	// SetIPContext fills conn.Context.IpContext for a connection of the
	// given type. It is called on every Request, including refreshes.
	SetIPContext(ctx context.Context, conn *networkservice.Connection, t proxy.ConnType) error
	// UnsetIPContext releases the addresses of the connection (the
	// implementation may delay the release so that a quick re-Request keeps
	// them).
	UnsetIPContext(ctx context.Context, conn *networkservice.Connection, t proxy.ConnType) error
}

// establishedKey marks, in the connection's metadata, that a Request of this
// connection has succeeded once.
type establishedKey struct{}
