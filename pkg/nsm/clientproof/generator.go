package clientproof

import (
	"encoding/base64"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/networkservicemesh/sdk/pkg/tools/token"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"google.golang.org/grpc/credentials"
)

// Generator signs NSM tokens as the SDK's spiffejwt generator does (ES256
// with the SVID's key; subject the SVID's ID; audience the peer's ID; an
// expiry bounded by lifetime and by both certificates) and puts the SVID's
// chain in the header (x5c), so that a server after the NSMgr can Prove the
// subject.
func Generator(src x509svid.Source, lifetime time.Duration) token.GeneratorFunc {
	return func(authInfo credentials.AuthInfo) (string, time.Time, error) {
		svid, err := src.GetX509SVID()
		if err != nil {
			return "", time.Time{}, fmt.Errorf("NSM token: SVID: %w", err)
		}
		exp := time.Now().Add(lifetime)
		if na := svid.Certificates[0].NotAfter; na.Before(exp) {
			exp = na
		}
		claims := jwt.RegisteredClaims{Subject: svid.ID.String()}
		if aud, notAfter, ok, err := peerOf(authInfo); err != nil {
			return "", time.Time{}, err
		} else if ok {
			claims.Audience = jwt.ClaimStrings{aud}
			if notAfter.Before(exp) {
				exp = notAfter
			}
		}
		claims.ExpiresAt = jwt.NewNumericDate(exp)
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
		chain := make([]string, 0, len(svid.Certificates))
		for _, c := range svid.Certificates {
			chain = append(chain, base64.StdEncoding.EncodeToString(c.Raw))
		}
		tok.Header[chainHeader] = chain
		signed, err := tok.SignedString(svid.PrivateKey)
		if err != nil {
			return "", time.Time{}, fmt.Errorf("NSM token of %s: %w", svid.ID, err)
		}
		return signed, exp, nil
	}
}

// chainHeader is the JOSE header of the signer's certificate chain.
const chainHeader = "x5c"

// peerOf is the SPIFFE ID and expiry of the TLS peer's certificate, when
// authInfo has one.
func peerOf(authInfo credentials.AuthInfo) (id string, notAfter time.Time, ok bool, err error) {
	info, isTLS := authInfo.(credentials.TLSInfo)
	if !isTLS || len(info.State.PeerCertificates) == 0 {
		return "", time.Time{}, false, nil
	}
	cert := info.State.PeerCertificates[0]
	peerID, err := x509svid.IDFromCert(cert)
	if err != nil {
		return "", time.Time{}, false, fmt.Errorf("NSM token: the peer's certificate has no SPIFFE ID: %w", err)
	}
	return peerID.String(), cert.NotAfter, true, nil
}
