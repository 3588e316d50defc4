package credentials_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// jwtClaims are the NSM token claims the tests look at.
type jwtClaims struct {
	Sub string   `json:"sub"`
	Aud []string `json:"aud"`
	Exp int64    `json:"exp"`
}

// es256Valid says whether the ES256 JWT tok is signed by the key of pub.
func es256Valid(t *testing.T, tok string, pub crypto.PublicKey) bool {
	t.Helper()
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3, "a JWT, got %q", tok)
	header, err := base64.RawURLEncoding.DecodeString(parts[0])
	require.NoError(t, err)
	require.Contains(t, string(header), `"alg":"ES256"`)
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	require.NoError(t, err)
	require.Len(t, sig, 64, "ES256 signature is r||s")
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	ecPub, ok := pub.(*ecdsa.PublicKey)
	require.True(t, ok, "an ECDSA key")
	return ecdsa.Verify(ecPub, digest[:], r, s)
}

// verifyES256 checks an ES256 JWT against pub and returns its claims.
func verifyES256(t *testing.T, tok string, pub crypto.PublicKey) jwtClaims {
	t.Helper()
	require.True(t, es256Valid(t, tok, pub), "the token must be signed with the SVID key")
	payload, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	require.NoError(t, err)
	var c jwtClaims
	require.NoError(t, json.Unmarshal(payload, &c))
	return c
}
