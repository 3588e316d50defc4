// Package expiry owns the end of an NSM connection that its client stopped
// refreshing: the chain element that closes a connection, through the
// chain, once the expiry of its previous path segment (the NSMgr's) has
// passed without a new Request.
//
// It replaces the SDK's timeout server in the endpoint chain, with the
// same semantics (the wait is the time to the expiry less the time the
// Request had left when it arrived; a refresh re-arms the wait; a Close
// that reaches the element cancels it, unless it failed on a deadline or a
// cancellation, so that the expiry still closes the connection). The SDK's
// server waits in a goroutine per connection; here a connection's wait is
// a timer (clock.AfterFunc), which holds no goroutine until it fires.
package expiry
