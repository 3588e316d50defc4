package forwarder

import (
	"context"
	"log/slog"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"

	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
)

// An endpoint restarted in its own namespace (the proxy's container
// restarted in its pod, an upgrade in place) is asked for its connections
// again with their ids, through this forwarder. The endpoint's new run
// listens on a new socket, so the registry gives a new URL for it (an
// inode URL: a socket made anew is a new inode, whatever its path), and
// the SDK's dial client in the forwarder's client chain closes the
// connection down that chain toward the old URL before it requests through
// the new one. That Close ends nothing: the NSC keeps its connection, and
// the veth pair still carries its traffic (the endpoint's end, a port of
// the proxy's bridge, and the NSC's end with its addresses and routes).
//
// So the veth element keeps the pair through a Close made while a Request
// of the same connection runs (requestScope marks the Request's context
// before the forwarder's client chain), and the Request that follows asks
// the endpoint for the interface name the pair has: the endpoint's new run
// names the same interface, and the pair is kept as it is. The SDK's
// mechanism translation forgets the endpoint's mechanism at that Close, so
// without the name the new run would name a new interface and the pair
// would be replaced. A Close from the NSC, from the connection's expiry or
// from a reselect (the server's begin closes with the context of an
// earlier Request) comes outside a Request and removes the pair as
// before; a Request that takes the connection to another endpoint's
// namespace replaces the pair (madeFor.ensure). A Close that a later
// element of the client chain makes to undo a Request it failed keeps the
// pair too: the pair then stays until the connection's next Request takes
// it over or its Close removes it.

// requestScopeKey marks a context as the one of a Request that runs
// through the forwarder's chain.
type requestScopeKey struct{}

// requestScope is the server element, the last before the forwarder's
// client chain, that marks each Request's context (see above).
type requestScope struct{}

func (requestScope) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	ctx = withinRequest(ctx)
	return next.Server(ctx).Request(ctx, request)
}

func (requestScope) Close(ctx context.Context, conn *networkservice.Connection) (*empty.Empty, error) {
	return next.Server(ctx).Close(ctx, conn)
}

// withinRequest marks ctx as a Request's.
func withinRequest(ctx context.Context) context.Context {
	return context.WithValue(ctx, requestScopeKey{}, true)
}

// closeWithinRequest reports whether a Close with ctx is made by an
// element of the forwarder's client chain while a Request of the
// connection runs (the dial client moving it to the endpoint's new URL).
func closeWithinRequest(ctx context.Context) bool {
	v, _ := ctx.Value(requestScopeKey{}).(bool)
	return v
}

// keepOnMove reports, for a Close of connID, whether the pair stays: the
// Close is made within a Request (see above). It logs what it keeps.
func (v *vethClient) keepOnMove(ctx context.Context, connID string) bool {
	if !closeWithinRequest(ctx) {
		return false
	}
	if p, ok := v.pairs.get(connID); ok {
		slog.Info("veth pair kept: the connection moves to a new URL of its endpoint",
			append([]any{"conn", connID}, p.attrs()...)...)
	}
	return true
}

// askKeptName makes a Request that carries no mechanism toward the
// endpoint (the first after a move) ask for the endpoint's interface name
// of the pair connID has, if it has one.
func (v *vethClient) askKeptName(connID string, request *networkservice.NetworkServiceRequest) {
	if request.GetConnection().GetMechanism() != nil {
		return
	}
	p, ok := v.pairs.get(connID)
	if !ok {
		return
	}
	for _, m := range request.GetMechanismPreferences() {
		if km := kernelmech.ToMechanism(m); km != nil {
			km.SetInterfaceName(p.nseName)
		}
	}
}

// get returns the object of connID, if any.
func (m *madeFor[T]) get(connID string) (T, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.byConn[connID]
	return o, ok
}
