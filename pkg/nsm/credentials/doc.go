// Package credentials owns the proxy's gRPC security: SPIFFE X.509 SVIDs
// from the workload API (SPIFFE_ENDPOINT_SOCKET) for mutual TLS toward NSM,
// the IPAM and the configuration server, the NSM per-RPC JWT tokens signed
// with the SVID, and the matching authorization elements. An explicit
// insecure mode, for local use only, uses plaintext and an opaque token
// accepted by authorize.Any(), and says so in the log.
package credentials
