// Package reaper owns the forwarder's watch over the pods behind its
// connections: it closes a connection once the network namespace of its
// client or of its endpoint has lost its pod.
//
// While a connection lasts, NSM's file descriptors keep both namespaces
// alive after their pods are gone: the NSMgr's and the forwarder's recvfd
// hold them until the connection's Close, and grpcfd keeps every descriptor
// a socket carried until that socket closes. For a client that died
// without closing, that Close is its token's expiry, ten minutes later.
// Until then the veth pair of the connection stays too, one end in the
// dead pod's namespace and the other in a live one: a load balancer kept
// routing down the link of a replaced proxy for those ten minutes.
//
// A Reaper judges a namespace by what keeps it alive other than a file
// descriptor: a process in it (any process /proc shows) or a mount of it in
// the forwarder's mount namespace (ip netns add). A namespace it has seen
// alive and then finds kept by neither in two sweeps in a row is orphaned:
// its pod is gone. The Reaper then closes the connection through begin, as
// its timeout would: the chain removes the connection's kernel objects (the
// veth pair, both ends at once; the VXLAN device), releases the descriptors
// it holds, and sends the Close on toward the endpoint (across nodes, through
// the other node's forwarder, which removes its end).
//
// A namespace the Reaper has never seen alive is never judged: a forwarder
// that cannot see the processes of its node's pods (a pod without hostPID)
// keeps every connection until it is closed, as forwarders did before.
//
// The server element records each connection's client end and is where a
// Close started by a sweep enters the chain; place it after recvfd and
// before the elements that select the mechanism. The client element records
// the endpoint end; place it just before recvfd in the client chain.
package reaper
