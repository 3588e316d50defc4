package authorize

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
)

// token is a path segment's JWT as the policies read it: its claims, and
// what its signature covers.
type token struct {
	sub    string
	hasSub bool
	aud    []string // the audiences that are strings; nil if aud is not a list
	exp    float64
	hasExp bool // exp is present and a number
	// verifiable: the header is one OPA's io.jwt.verify_es256 accepts (its
	// alg, kid, typ and cty strings, its crit a list that starts with a
	// string); io.jwt.decode does not look at them.
	verifiable bool
	signed     string
	sig        []byte
}

// parseToken decodes a JWT without verifying it, accepting what OPA's
// io.jwt.decode accepts except nested tokens (see refuseContentType).
func parseToken(raw string) (*token, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("not a JWT: %d parts", len(parts))
	}
	var header map[string]any
	if err := decodeJSONPart(parts[0], &header); err != nil {
		return nil, fmt.Errorf("JWT header: %w", err)
	}
	if _, ok := header["enc"]; ok {
		return nil, errors.New("JWT header: an encrypted token (enc)")
	}
	if err := refuseContentType(header); err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := decodeJSONPart(parts[1], &claims); err != nil {
		return nil, fmt.Errorf("JWT payload: %w", err)
	}
	sig, err := decodePart(parts[2])
	if err != nil {
		return nil, fmt.Errorf("JWT signature: %w", err)
	}
	t := &token{signed: parts[0] + "." + parts[1], sig: sig, verifiable: verifiableHeader(header)}
	t.sub, t.hasSub = claims["sub"].(string)
	t.exp, t.hasExp = claims["exp"].(float64)
	if aud, ok := claims["aud"].([]any); ok {
		t.aud = make([]string, 0, len(aud))
		for _, a := range aud {
			if s, ok := a.(string); ok {
				t.aud = append(t.aud, s)
			}
		}
	}
	return t, nil
}

// refuseContentType refuses a header whose cty is not a string (OPA's
// io.jwt.decode panics on it, taking the SDK's server down) or is "JWT": OPA
// then reads the claims of a token nested in the payload, which the SDK
// never makes, and which we do not read.
func refuseContentType(header map[string]any) error {
	cty, ok := header["cty"]
	if !ok {
		return nil
	}
	s, ok := cty.(string)
	switch {
	case !ok:
		return errors.New("JWT header: a cty that is not a string")
	case s == "JWT":
		return errors.New("JWT header: a nested token (cty JWT)")
	}
	return nil
}

// verifiableHeader says whether OPA's io.jwt.verify_es256 parses header:
// alg, kid, typ and cty, when present, are strings, and crit, when present,
// is a list whose first element is a string (OPA stops reading crit at its
// first element that is not a string, and refuses it empty).
func verifiableHeader(header map[string]any) bool {
	for _, name := range []string{"alg", "kid", "typ", "cty"} {
		if v, ok := header[name]; ok {
			if _, ok := v.(string); !ok {
				return false
			}
		}
	}
	if v, ok := header["crit"]; ok {
		crit, ok := v.([]any)
		if !ok || len(crit) == 0 {
			return false
		}
		if _, ok := crit[0].(string); !ok {
			return false
		}
	}
	return true
}

// decodePart decodes one base64url part as OPA's base64url.decode does: a
// part that does not end in "=" is padded to a multiple of four first, and
// the result must then be padded right (so a stray "=", or a line break
// that shifts the length, is refused).
func decodePart(s string) ([]byte, error) {
	if !strings.HasSuffix(s, "=") {
		switch len(s) % 4 {
		case 1:
			return nil, fmt.Errorf("illegal base64url length %d", len(s))
		case 2:
			s += "=="
		case 3:
			s += "="
		}
	}
	return base64.URLEncoding.DecodeString(s)
}

// decodeJSONPart decodes a base64url part that holds a JSON object, and
// nothing after it.
func decodeJSONPart(s string, v *map[string]any) error {
	b, err := decodePart(s)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	if *v == nil {
		return errors.New("not a JSON object")
	}
	return nil
}

// audience says whether id is one of the token's audiences.
func (t *token) audience(id string) bool {
	for _, a := range t.aud {
		if a == id {
			return true
		}
	}
	return false
}

// signedBy says whether the token's ES256 signature (r||s) verifies with
// the public key of cert. The header's alg is not consulted (the policy
// names the algorithm), but the header must be one OPA would verify.
func (t *token) signedBy(cert *x509.Certificate) bool {
	if cert == nil || !t.verifiable {
		return false
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || len(t.sig) != 64 {
		return false
	}
	digest := sha256.Sum256([]byte(t.signed))
	r := new(big.Int).SetBytes(t.sig[:32])
	s := new(big.Int).SetBytes(t.sig[32:])
	return ecdsa.Verify(pub, digest[:], r, s)
}
