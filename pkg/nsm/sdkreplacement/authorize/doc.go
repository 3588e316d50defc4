// Package authorize owns the authorization of NSM requests by the tokens of
// their path: the chain elements that an endpoint (NewServer) and a client
// (NewClient) put in their chains, with the NSM SDK's default policies
// written in Go.
//
// The SDK evaluates the same policies as Rego with the Open Policy Agent,
// which its authorize packages link into every binary that imports them
// (about 9 MiB of a proxy's resident memory, and an evaluation per
// policy per Request). The policies here are those of the SDK's default
// sets, with the same decisions:
//
//   - tokens valid: every segment's token is a JWT (three base64url parts,
//     a JSON header and a JSON object as payload);
//   - tokens chained: each segment's token has the next one's subject among
//     its audiences;
//   - tokens expired: every token has a numeric exp in the future;
//   - previous token signed (server): the token of the segment before ours
//     is signed (ES256) by the key of the caller's TLS certificate;
//   - next token signed (client): the token of the segment after ours is
//     signed by the key of the server's TLS certificate.
//
// A token is read as OPA's io.jwt.decode reads it (base64url parts padded
// right or not at all, no "enc", a JSON object as header and payload), and
// the token that a policy verifies must have a header that OPA's
// io.jwt.verify_es256 parses (alg, kid, typ and cty strings, crit a list
// starting with a string).
//
// The decisions differ from the Rego's in these corners, each tested
// against the SDK: an exp that is not a number never counts as alive (Rego
// orders every string after every number, so "exp":"x" passed); a token
// with several audiences is chained when the next subject is among them
// (the Rego fails with an evaluation conflict, an Internal error); a path
// index beyond the path, or with no segment before ours, is refused (the
// SDK's server panics); a header whose cty is not a string is refused (OPA
// panics, which takes the SDK's server down). Stricter than the SDK, on
// tokens that its token generator never makes: a signature is 64 bytes, r
// then s, so P-256 keys only (OPA splits any length in half, for any ECDSA
// key); a nested token (cty "JWT"), a claim number beyond float64, and a
// subject or audience that is not a string are refused. A client does not
// check its Close: it accepts nothing from the server, and refusing it
// locally would leave the connection open at the far end until it expires.
// A client verifies with the peer of its own call only (the SDK's falls
// back on the context's peer, an incoming call's).
//
// Any() turns the checks off (insecure mode, the lab).
package authorize
