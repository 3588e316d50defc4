// Package clientproof owns the proof of who opened an NSM connection: the
// SPIFFE ID of the client, read from the token of the path's first segment
// and proved by the certificate that token carries.
//
// NSM's tokens alone prove nothing of the client: the client writes its
// token's subject itself, and the NSMgr (the SDK's prev_token_signed
// policy) checks only that the token is signed by the key of the client's
// TLS certificate, never that the subject is that certificate's ID. A
// client holding any SVID of the trust domain can thus sign a token whose
// subject is another workload's ID, and every element after the NSMgr
// reads that subject. This package closes the gap for the clients that
// sign with Generator: their token's header carries the signer's X.509-SVID
// chain (the JOSE "x5c" header, RFC 7515 §4.1.6), and Prove accepts a token
// only when that chain verifies against the trust bundle, its leaf's
// SPIFFE ID is the token's subject, the leaf's key signed the token (ES256)
// and the token has not expired. The NSMgr's policies read the same token
// as before (an unknown header is ignored); only the header grows by the
// chain (under a kilobyte for a SPIRE SVID).
//
// What Prove shows is that the holder of that SVID's key signed this token
// within its lifetime; the NSMgr shows that the caller holding the key of
// its TLS certificate handed it in, but only for the token of the segment
// before its own: a caller that has captured another client's token can
// put it first in a path of its own, before a segment it signs itself,
// and NSM's policies pass it (TestCapturedTokenPassesNSMAuthorization in
// pkg/nsm/sdkreplacement/authorize). A Prover therefore holds each token
// it proves to the one client connection it was first presented for
// (Client, End): a copy presented for another connection, or after that
// connection ended, is refused. A copy presented first to another Prover
// (another proxy) within the token's lifetime is not caught
// (docs/security.md). The tokens a Prover remembers are bounded
// (WithLedgerSize); when that many are still valid it proves new ones
// without remembering them (it fails open: a flood of tokens does not lock
// genuine clients out), counts them (Ledger) and says so in its log, at
// most once a minute.
package clientproof
