// Package findretry owns the NSM registry client element that lists again
// when a listing Find's answer broke before its end.
//
// A registry Find that is not a watch answers with a stream of endpoints
// ended by io.EOF. The SDK's discover element reads that stream with
// registry.ReadNetworkServiceEndpointList, which stops at the first error
// and keeps what came before it: a stream that broke (a transient failure
// on the registry's side) reads as a complete list with endpoints missing,
// and the request fails with "network service endpoint candidates not
// found" although the endpoint is registered. One such transient failure is
// grpcfd's (v1.1.4) SendFilename, which closes the file it sends twice and
// reports the second close as the send's error when the connection writes
// the descriptor before the caller looked at the result: the SDK's registry
// sendfd server then fails the Find of an endpoint reached over a unix
// socket (see docs/registry-find-race.md).
//
// The element reads the whole answer of a listing Find before it returns,
// runs the Find again when the answer broke, a few times with a short
// pause, and hands on the complete list. Watches pass through: their
// owners reconnect (pkg/nsm/fullmesh does).
package findretry
