// Package clientprooftest makes the tokens that the tests of clientproof's
// users present as attackers: tokens a client writes itself, as any
// client that controls its own NSM token generator can.
package clientprooftest

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// Forge signs a token whose subject is sub and whose expiry is exp with
// signer's key, and puts chain's certificates in its x5c header (none when
// chain is nil, as NSM's own generator sends).
func Forge(t testing.TB, signer, chain *x509svid.SVID, sub string, exp time.Time) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.RegisteredClaims{Subject: sub, ExpiresAt: jwt.NewNumericDate(exp)})
	if chain != nil {
		x5c := make([]string, 0, len(chain.Certificates))
		for _, c := range chain.Certificates {
			x5c = append(x5c, base64.StdEncoding.EncodeToString(c.Raw))
		}
		tok.Header["x5c"] = x5c
	}
	s, err := tok.SignedString(signer.PrivateKey)
	if err != nil {
		t.Fatalf("signing a forged token: %v", err)
	}
	return s
}

// ForgeOwn is what a client sends to pass as sub with its own key and
// chain, valid for a minute.
func ForgeOwn(t testing.TB, own *x509svid.SVID, sub string) string {
	t.Helper()
	return Forge(t, own, own, sub, time.Now().Add(time.Minute))
}
