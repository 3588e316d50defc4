package clientproof

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/causeway-net/causeway/internal/clock"
)

// ErrNoChain says that a token carries no certificate chain: its client
// signs with the SDK's own generator (or another one), and its subject is
// only claimed.
var ErrNoChain = errors.New("the token carries no certificate chain (x5c): its subject is claimed, not proved")

// Prover proves the clients of NSM connections against the trust bundles
// of a source, and holds each token it proves for a connection to that
// connection (see Client). Its methods are safe for concurrent use.
type Prover struct {
	bundles x509bundle.Source
	clock   clock.Clock
	ledger  *ledger
}

// NewProver returns a Prover that verifies chains against bundles.
func NewProver(bundles x509bundle.Source, opts ...Option) *Prover {
	o := newOptions(opts)
	return &Prover{bundles: bundles, clock: o.clock, ledger: newLedger(o.ledgerSize, o.log)}
}

// Client proves the SPIFFE ID of the client of conn: that of the token of
// its path's first segment (see Token), presented for the client
// connection that segment's id names. A token proves its client for one
// client connection only, and not after End of it: the same token
// presented for another connection, or again after its connection ended,
// is refused with ErrReplayed (until it expires; see ledger).
func (p *Prover) Client(conn *networkservice.Connection) (spiffeid.ID, error) {
	segs := conn.GetPath().GetPathSegments()
	if len(segs) == 0 {
		return spiffeid.ID{}, errors.New("the connection has no path")
	}
	client := segs[0].GetId()
	if client == "" {
		return spiffeid.ID{}, errors.New("the client's path segment has no id")
	}
	now := p.clock.Now()
	id, until, err := p.prove(segs[0].GetToken(), now)
	if err != nil {
		return spiffeid.ID{}, err
	}
	if err := p.ledger.use(segs[0].GetToken(), client, until, now); err != nil {
		return spiffeid.ID{}, fmt.Errorf("the token of %s: %w", id, err)
	}
	return id, nil
}

// End records that the client connection of conn (its path's first
// segment's id) has ended: the tokens it presented prove nothing more.
func (p *Prover) End(conn *networkservice.Connection) {
	if segs := conn.GetPath().GetPathSegments(); len(segs) > 0 && segs[0].GetId() != "" {
		p.ledger.end(segs[0].GetId())
	}
}

// Ledger says how many tokens the Prover remembers for Client.
func (p *Prover) Ledger() LedgerStats { return p.ledger.stats() }

// Token proves the subject of raw: the chain of its x5c header verifies
// against the bundles (now), its leaf's SPIFFE ID is the subject, the
// leaf's key signed raw with ES256, and raw has not expired. The error
// says which step failed.
func (p *Prover) Token(raw string) (spiffeid.ID, error) {
	id, _, err := p.prove(raw, p.clock.Now())
	return id, err
}

// prove is Token at now; until is when the proof runs out (the token's
// expiry, or its certificate's if sooner).
func (p *Prover) prove(raw string, now time.Time) (id spiffeid.ID, until time.Time, err error) {
	var claims jwt.RegisteredClaims
	var notAfter time.Time
	parser := jwt.Parser{ValidMethods: []string{jwt.SigningMethodES256.Alg()}, SkipClaimsValidation: true}
	_, err = parser.ParseWithClaims(raw, &claims, func(t *jwt.Token) (any, error) {
		leaf, chainID, err := p.verifyChain(t.Header[chainHeader], now)
		if err != nil {
			return nil, err
		}
		id, notAfter = chainID, leaf.NotAfter
		key, ok := leaf.PublicKey.(*ecdsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("the certificate of %s has no ECDSA key", chainID)
		}
		return key, nil
	})
	if err != nil {
		return spiffeid.ID{}, time.Time{}, unwrapJWT(err)
	}
	if claims.Subject != id.String() {
		return spiffeid.ID{}, time.Time{}, fmt.Errorf("the token's subject %q is not its certificate's ID %s", claims.Subject, id)
	}
	if claims.ExpiresAt == nil || !now.Before(claims.ExpiresAt.Time) {
		return spiffeid.ID{}, time.Time{}, fmt.Errorf("the token of %s has expired or has no expiry", id)
	}
	until = claims.ExpiresAt.Time
	if notAfter.Before(until) {
		until = notAfter
	}
	return id, until, nil
}

// verifyChain decodes the x5c header (base64 DER, leaf first) and verifies
// it as an X.509-SVID against the bundles at now.
func (p *Prover) verifyChain(header any, now time.Time) (*x509.Certificate, spiffeid.ID, error) {
	list, ok := header.([]any)
	if !ok || len(list) == 0 {
		return nil, spiffeid.ID{}, ErrNoChain
	}
	certs := make([]*x509.Certificate, 0, len(list))
	for i, v := range list {
		s, ok := v.(string)
		if !ok {
			return nil, spiffeid.ID{}, fmt.Errorf("x5c entry %d is not a string", i)
		}
		der, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, spiffeid.ID{}, fmt.Errorf("x5c entry %d: %w", i, err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, spiffeid.ID{}, fmt.Errorf("x5c entry %d: %w", i, err)
		}
		certs = append(certs, c)
	}
	id, _, err := x509svid.Verify(certs, p.bundles, x509svid.WithTime(now))
	if err != nil {
		return nil, spiffeid.ID{}, fmt.Errorf("the token's certificate chain: %w", err)
	}
	return certs[0], id, nil
}

// unwrapJWT turns the JWT library's validation error into the cause the
// key function gave (or its own reason), for a readable message.
func unwrapJWT(err error) error {
	var verr *jwt.ValidationError
	if errors.As(err, &verr) && verr.Errors&jwt.ValidationErrorSignatureInvalid != 0 {
		return fmt.Errorf("the token is not signed by the key of its certificate: %w", verr.Inner)
	}
	if errors.As(err, &verr) && verr.Inner != nil {
		return verr.Inner
	}
	return fmt.Errorf("the token: %w", err)
}
