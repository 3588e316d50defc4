// Package registryclient owns the assembly of the NSM registry client
// chains (network services and network service endpoints) toward an
// NSMgr: the elements and order of the SDK's registry chains/client,
// without its authorize elements, which with their default authorize.Any()
// authorize nothing but link the Open Policy Agent into the binary (see
// pkg/nsm/sdkreplacement/authorize), and without its heal elements, which none of our
// callers wants (they reopen watches and re-register themselves).
package registryclient
