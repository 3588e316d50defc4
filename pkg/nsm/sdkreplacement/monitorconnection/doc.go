// Package monitorconnection owns an NSM endpoint's MonitorConnection service: the
// stream on which an NSMgr watches the connections it forwarded to the
// endpoint (to heal them when they go down). It is also the chain element
// that sees every Request and Close and turns them into the service's
// UPDATE and DELETE events.
//
// It replaces the SDK's monitor server in the chain of a terminal endpoint
// (the proxy's toward its targets). It is no replacement in a passthrough
// such as a forwarder: there the SDK's server also watches the next hop
// and passes its events up, which is how an NSMgr learns that an endpoint
// behind the forwarder died. That server
// clones every event once per open monitor stream, matched or not, and an
// NSMgr opens one stream per connection: with n targets, each Request
// cloned its connection n times (78 % of the bytes the proxy allocated to
// bring up 500 targets, O(n²) over a node's set-up). Here an event's
// connection is cloned once and handed, unchanged, to the streams whose
// selector matches it; the stream handler's own goroutine sends, so a
// stream costs no goroutine of its own either. The streams and the
// connections are indexed by path segment id (an NSMgr's selector names
// one segment of one connection), so that neither an event nor a new
// stream's initial state checks every selector or every connection.
package monitorconnection
