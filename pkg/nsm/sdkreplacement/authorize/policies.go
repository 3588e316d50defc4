package authorize

import (
	"crypto/x509"
	"fmt"
	"time"
)

// view is what the policies judge: the segments' tokens (nil where a token
// does not parse), the index of our own segment among them, the peer's TLS
// certificate (nil without one) and the time.
type view struct {
	tokens []*token
	index  int
	peer   *x509.Certificate
	now    time.Time
}

// policy is one rule of a set: nil when the view passes, else why not.
type policy struct {
	name  string
	check func(v *view) error
}

// serverPolicies are the SDK's default set of an endpoint's authorize
// server, in its order (common, then server).
var serverPolicies = []policy{
	{"tokens_chained", tokensChained},
	{"tokens_expired", tokensExpired},
	{"tokens_valid", tokensValid},
	{"prev_token_signed", prevTokenSigned},
}

// clientPolicies are the SDK's default set of a client's authorize element
// (common, then client).
var clientPolicies = []policy{
	{"tokens_chained", tokensChained},
	{"tokens_expired", tokensExpired},
	{"tokens_valid", tokensValid},
	{"next_token_signed", nextTokenSigned},
}

// tokensValid: every segment carries a token that parses as a JWT.
func tokensValid(v *view) error {
	for i, t := range v.tokens {
		if t == nil {
			return fmt.Errorf("segment %d: the token is not a JWT", i)
		}
	}
	return nil
}

// tokensChained: each token names the next one's subject among its
// audiences.
func tokensChained(v *view) error {
	for i := 0; i+1 < len(v.tokens); i++ {
		cur, nxt := v.tokens[i], v.tokens[i+1]
		if cur == nil || nxt == nil {
			return fmt.Errorf("segments %d and %d: a token is not a JWT", i, i+1)
		}
		if !nxt.hasSub || !cur.audience(nxt.sub) {
			return fmt.Errorf("segment %d: its token's audience is not segment %d's subject %q", i, i+1, nxt.sub)
		}
	}
	return nil
}

// tokensExpired: every token has a numeric exp after now.
func tokensExpired(v *view) error {
	now := float64(v.now.UnixNano()) / 1e9
	for i, t := range v.tokens {
		if t == nil || !t.hasExp {
			return fmt.Errorf("segment %d: the token has no expiry", i)
		}
		if !(now < t.exp) {
			return fmt.Errorf("segment %d: the token expired at %s", i, time.Unix(int64(t.exp), 0).UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// prevTokenSigned: the segment before ours carries a token signed by the
// caller.
func prevTokenSigned(v *view) error {
	return signedByPeer(v, v.index-1, "previous")
}

// nextTokenSigned: the segment after ours carries a token signed by the
// server.
func nextTokenSigned(v *view) error {
	return signedByPeer(v, v.index+1, "next")
}

func signedByPeer(v *view, i int, which string) error {
	if i < 0 || i >= len(v.tokens) {
		return fmt.Errorf("the path has no %s segment (index %d of %d)", which, i, len(v.tokens))
	}
	if v.peer == nil {
		return fmt.Errorf("segment %d: no TLS certificate of the peer to verify its token with", i)
	}
	if v.tokens[i] == nil || !v.tokens[i].signedBy(v.peer) {
		return fmt.Errorf("segment %d: the token is not signed by the peer's key", i)
	}
	return nil
}
