package credentials

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/networkservicemesh/sdk/pkg/tools/token"
	grpccreds "google.golang.org/grpc/credentials"
)

// insecureSubject is the SPIFFE id claimed by unsigned tokens.
const insecureSubject = "spiffe://causeway.local/insecure"

// unsignedTokens generates JWTs without a signature (alg "none"): nothing
// verifies them in insecure mode, but the SDK parses their subject.
func unsignedTokens(subject string, lifetime time.Duration) token.GeneratorFunc {
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	return func(grpccreds.AuthInfo) (string, time.Time, error) {
		exp := time.Now().Add(lifetime)
		claims, err := json.Marshal(map[string]any{"sub": subject, "exp": exp.Unix()})
		if err != nil {
			return "", time.Time{}, fmt.Errorf("encode token claims: %w", err)
		}
		return header + "." + base64.RawURLEncoding.EncodeToString(claims) + ".", exp, nil
	}
}
