// Package forwarder owns Causeway's NSM forwarder: an NSM endpoint that
// joins the requesting (NSC) and the serving (NSE) network namespaces of a
// connection, and lets sdk-kernel's connectioncontextkernel program the
// addresses, routes, policy rules and MTU of both ends.
//
// Mechanisms are selected as NSM's forwarders select them. The client side
// offers KERNEL (class LOCAL) and, when Remote names the node's address,
// VXLAN (class REMOTE, with this node as the tunnel's source, through the
// SDK's vni client); the SDK's filtermechanisms keeps LOCAL toward a unix
// socket (an endpoint of this node's NSMgr) and REMOTE toward another node's
// NSMgr (a TCP URL). The server side accepts KERNEL from a client of this
// node and VXLAN from another node's forwarder, whose SDK vni server sets
// this node as the destination and chooses the VNI: even or odd by the
// order of the two node addresses, so two nodes never choose the same VNI
// for each other, and carried in the mechanism's parameters so that both
// ends use it.
//
//   - Both ends on this node: one veth pair, created directly in the two
//     namespaces under the names their kernel mechanisms carry.
//   - Across nodes: each node's forwarder makes one VXLAN device for the
//     connection, from the node's namespace (which keeps the tunnel's UDP
//     socket) directly into the client's namespace (requesting node) or
//     the endpoint's (serving node), with the peer node as its one remote.
//     A device per connection rather than one shared VXLAN device with an
//     FDB entry per connection: each connection's interface must live in
//     its own pod's namespace with its own addresses, which a shared device
//     (in the node's namespace) cannot give without a bridge and a veth per
//     connection; a per-connection device is one link to create and one to
//     delete, its unicast remote is its only forwarding entry and goes with
//     it, and the kernel shares one UDP socket among the devices of a port.
//
// A connection whose client's or endpoint's pod is gone is closed by the
// forwarder itself (sub-package reaper): NSM's descriptors keep a dead pod's
// namespace, and with it the veth pair into a live pod, until the
// connection's Close, which for a client that died is its expiry.
//
// Kernel objects are idempotent across refreshes; a forwarder started again
// adopts the veth pairs and VXLAN devices an earlier run made for a
// connection (a VXLAN device carries its connection's id in its alias, so
// the devices of a connection that an earlier run made under other names are
// removed), and Close removes them, except a veth pair when the Close only
// moves the connection to a new URL of its endpoint, restarted in its
// namespace (move.go). A forwarder of another name (a new pod) heals a
// connection under another connection id: the device an earlier run made
// for it, which outlives that run when the tunnels' sockets live in the
// node's namespace, is found by the VNI it holds or the connection's
// addresses toward the same peer, and removed (earlier.go).
//
// The lab's control plane (pkg/nsm/controlplane), the tests' NSM sandbox
// (pkg/nsm/nsmtest) and the test cluster's forwarder image
// (test/kube/images/forwarder) run it. It is in the product tree, not the test tree, because the lab
// (cmd/lab), a shipped binary, runs it through pkg/nsm/controlplane, and
// product code never imports the test tree. The image, which only the test cluster uses, is in
// the test tree already. Its own chain elements are the sub-packages
// dumpretry (a request failed by an interrupted netlink dump is run again),
// findretry (a registry listing that broke before its end is listed again)
// and reaper (a connection whose pod is gone is closed).
package forwarder
