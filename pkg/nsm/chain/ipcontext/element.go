package ipcontext

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/networkservicemesh/api/pkg/api/networkservice"

	"github.com/causeway-net/causeway/pkg/proxy"
)

// element is what the client and the server share: the Setter, the type of
// their connections, and the Request and Close around the rest of the
// chain.
type element struct {
	setter Setter
	typ    proxy.ConnType
	logger *slog.Logger
}

// request sets the IP context of conn and calls the rest of the chain
// (pass). When either fails on a connection never established (md records
// that), the addresses are released again so that they do not leak; a
// failed refresh keeps them.
func (e *element) request(ctx context.Context, md *sync.Map, conn *networkservice.Connection,
	pass func() (*networkservice.Connection, error)) (*networkservice.Connection, error) {
	_, established := md.Load(establishedKey{})
	if err := e.setter.SetIPContext(ctx, conn, e.typ); err != nil {
		if !established {
			e.unset(ctx, conn)
		}
		return nil, fmt.Errorf("set ip context of %s connection %s: %w", e.typ, conn.GetId(), err)
	}
	resp, err := pass()
	if err != nil {
		if !established {
			e.unset(ctx, conn)
		}
		return nil, err
	}
	md.Store(establishedKey{}, struct{}{})
	return resp, nil
}

// unset releases the addresses of conn; a failure is logged.
func (e *element) unset(ctx context.Context, conn *networkservice.Connection) {
	if err := e.setter.UnsetIPContext(ctx, conn, e.typ); err != nil {
		e.logger.Warn("unset ip context failed", "type", e.typ.String(), "conn", conn.GetId(), "error", err)
	}
}
