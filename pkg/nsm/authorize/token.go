package authorize

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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
	signed string
	sig    []byte
}

// parseToken decodes a JWT without verifying it.
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
	var claims map[string]any
	if err := decodeJSONPart(parts[1], &claims); err != nil {
		return nil, fmt.Errorf("JWT payload: %w", err)
	}
	sig, err := decodePart(parts[2])
	if err != nil {
		return nil, fmt.Errorf("JWT signature: %w", err)
	}
	t := &token{signed: parts[0] + "." + parts[1], sig: sig}
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

// decodePart decodes one base64url part, padded or not (as OPA does).
func decodePart(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// decodeJSONPart decodes a base64url part that holds a JSON object.
func decodeJSONPart(s string, v *map[string]any) error {
	b, err := decodePart(s)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return err
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
// the public key of cert. The header's alg is not consulted: the policy
// names the algorithm.
func (t *token) signedBy(cert *x509.Certificate) bool {
	if cert == nil {
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
