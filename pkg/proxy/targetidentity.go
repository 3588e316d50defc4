package proxy

import (
	"errors"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-net/causeway/pkg/nsm/clientproof"
)

// TargetIdentity proves who opens target connections, and says who may.
type TargetIdentity struct {
	// Prove proves the SPIFFE ID of the client of a target connection
	// (clientproof.Prover.Client); nil: nothing is proved (insecure mode),
	// targets carry no Identity and Allowed is not asked.
	Prove func(*networkservice.Connection) (spiffeid.ID, error)
	// Allowed, when set, is asked at every request of a target connection
	// before its IP context is set: a client whose ID is not proved, or
	// that Allowed refuses (the error says why), is refused with
	// PermissionDenied, counted and logged once per client. Nil: any
	// client the NSM authorization let through.
	Allowed func(spiffeid.ID) error
	// End, when set, is told of every target connection that ends (its
	// close, unless another connection superseded it under its key), so
	// that Prove refuses its tokens from then on
	// (clientproof.Prover.End).
	End func(*networkservice.Connection)
}

// proveTarget returns the proved SPIFFE ID of the client of a target
// connection ("" when none is proved) and, when the connection's client is
// not allowed, the PermissionDenied that refuses it.
func (p *Proxy) proveTarget(conn *networkservice.Connection, id string) (string, error) {
	ti := p.cfg.TargetIdentity
	if ti.Prove == nil {
		return "", nil
	}
	proved, err := ti.Prove(conn)
	if errors.Is(err, clientproof.ErrReplayed) {
		// A copy of another connection's token: refused whatever the
		// conduit admits, as a forgery would be if it could be told.
		p.idRefusals.Deny("replayed", clientIdentity(conn, id), "id", id, "reason", err.Error())
		return "", status.Errorf(codes.PermissionDenied, "target connection %s: %v", id, err)
	}
	if err != nil {
		if ti.Allowed == nil {
			return "", nil
		}
		claimed := clientIdentity(conn, id)
		p.idRefusals.Deny("unproved", claimed, "id", id, "reason", err.Error())
		return "", status.Errorf(codes.PermissionDenied, "target connection %s: the client's SPIFFE ID is not proved (%v), and this conduit admits only listed IDs", id, err)
	}
	if ti.Allowed != nil {
		if err := ti.Allowed(proved); err != nil {
			p.idRefusals.Deny("not_allowed", proved.String(), "id", id, "reason", err.Error())
			return "", status.Errorf(codes.PermissionDenied, "target connection %s: client %s may not connect to this conduit: %v", id, proved, err)
		}
	}
	return proved.String(), nil
}

// targetClient is who a target connection's limit counts it against: its
// proved ID; without one, while the proxy proves, its claimed subject
// marked unproved (a forged subject does not fill the quota of the
// client it names, when that client proves its ID); without proving,
// clientIdentity.
func (p *Proxy) targetClient(conn *networkservice.Connection, id, identity string) string {
	switch {
	case identity != "":
		return identity
	case p.cfg.TargetIdentity.Prove != nil:
		return "unproved " + clientIdentity(conn, id)
	default:
		return clientIdentity(conn, id)
	}
}

// takeoverLocked returns the PermissionDenied that refuses a request of the
// target connection id by another client than the one proved at its first
// request: the key is the first path segment's id, which the client
// chooses, and a request under another client's key would otherwise take
// over its addresses (and unpublish it). An unproved request of a proved
// key is refused as well. Nothing is checked while the proxy proves
// nothing. The caller holds p.mu.
func (p *Proxy) takeoverLocked(conn *networkservice.Connection, id, identity string) error {
	st := p.conns[id]
	if p.cfg.TargetIdentity.Prove == nil || st == nil || st.typ != TargetConn || st.client.Identity == "" || st.client.Identity == identity {
		return nil
	}
	by := identity
	if by == "" {
		by = "unproved " + clientIdentity(conn, id)
	}
	p.idRefusals.Deny("taken", by, "id", id, "holder", st.client.Identity)
	return status.Errorf(codes.PermissionDenied, "target connection %s is held by %s: %s may not take it over", id, st.client.Identity, by)
}
