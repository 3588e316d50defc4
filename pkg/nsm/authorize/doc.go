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
// The decisions differ from the Rego's in three corners, each tested
// against the SDK: an exp that is not a number never counts as alive (Rego
// orders every string after every number, so "exp":"x" passed); a token
// with several audiences is chained when the next subject is among them
// (the Rego fails with an evaluation conflict, an Internal error); a path
// index beyond the path, or with no segment before ours, is refused (the
// SDK's server panics). A client does not check its Close: it accepts nothing from the
// server, and refusing it locally would leave the connection open at the
// far end until it expires.
//
// Any() turns the checks off (insecure mode, the lab).
package authorize
