package authorize

import (
	"context"
	"crypto/x509"
	"fmt"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// checker applies one policy set.
type checker struct {
	policies []policy // none with Any
	opts     *options
}

func newChecker(set []policy, opts []Option) checker {
	o := newOptions(opts)
	if o.any {
		set = nil
	}
	return checker{policies: set, opts: o}
}

// check judges segments (the path as the side being checked sees it) with
// our own segment at index, against the peer's certificate. A refusal is a
// PermissionDenied naming the policy and the reason, and is logged.
func (c *checker) check(ctx context.Context, op string, conn *networkservice.Connection,
	segments []*networkservice.PathSegment, index int, p *peer.Peer) error {
	v := &view{tokens: make([]*token, len(segments)), index: index, peer: peerCert(p), now: c.opts.clock.Now()}
	for i, s := range segments {
		v.tokens[i], _ = parseToken(s.GetToken())
	}
	for _, pol := range c.policies {
		if err := pol.check(v); err != nil {
			c.opts.log.WarnContext(ctx, "NSM authorization refused", "op", op, "connection", conn.GetId(),
				"policy", pol.name, "peer", peerID(v.peer), "reason", err.Error())
			return status.Errorf(codes.PermissionDenied, "authorization policy %s: %v", pol.name, err)
		}
	}
	return nil
}

// peerCert is the leaf certificate of a TLS peer, nil without one.
func peerCert(p *peer.Peer) *x509.Certificate {
	if p == nil {
		return nil
	}
	var state []*x509.Certificate
	switch info := p.AuthInfo.(type) {
	case credentials.TLSInfo:
		state = info.State.PeerCertificates
	case *credentials.TLSInfo:
		state = info.State.PeerCertificates
	}
	if len(state) == 0 {
		return nil
	}
	return state[0]
}

// peerID is the SPIFFE ID of cert, for the log.
func peerID(cert *x509.Certificate) string {
	if cert == nil {
		return ""
	}
	id, err := x509svid.IDFromCert(cert)
	if err != nil {
		return fmt.Sprintf("(no SPIFFE ID: %v)", err)
	}
	return id.String()
}
