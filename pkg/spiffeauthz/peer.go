package spiffeauthz

import (
	"crypto/x509"
	"fmt"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
)

// ServerAuthorizer is what a client holds the server it dials to: the
// server's SPIFFE ID must match one of rules (the rules of callers, the
// other way round), in the trust domain own gives for those that leave it
// out. The TLS handshake fails otherwise, with the ID and why each rule
// missed it. Empty rules: any ID the trust bundle verifies.
func ServerAuthorizer(rules []string, own TrustDomainFunc) (tlsconfig.Authorizer, error) {
	parsed, err := ParseRules(rules)
	if err != nil {
		return nil, err
	}
	if len(parsed) == 0 {
		return tlsconfig.AuthorizeAny(), nil
	}
	a := New(parsed, own, nil)
	return func(id spiffeid.ID, _ [][]*x509.Certificate) error {
		if misses, ok := a.check(id); !ok {
			return fmt.Errorf("server %s is not the one expected (%s)", id, strings.Join(misses, "; "))
		}
		return nil
	}, nil
}
