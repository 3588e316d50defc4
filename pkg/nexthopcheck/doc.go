// Package nexthopcheck owns the datapath liveness of the neighbours a proxy
// forwards to: for each watched peer (an LB nexthop, or a target, on a link
// of the proxy's namespace) it sends an ICMP echo request every interval and
// judges the answers. It writes nothing to the kernel beyond its own probe
// sockets; what a caller does with a verdict (take a nexthop out of a route,
// or only report a target) is the caller's.
//
// # Mechanism
//
// The probes go through ping sockets (SOCK_DGRAM with IPPROTO_ICMP or
// IPPROTO_ICMPV6): no CAP_NET_RAW, but the namespace's
// net.ipv4.ping_group_range (which governs both families) must include the
// process's group; opening a socket otherwise fails with ErrNotPermitted.
// A socket per family and link, bound to the link (SO_BINDTOIFINDEX, which
// needs no capability on a socket not bound yet), so a probe leaves on the
// peer's link whatever the routes say (an IPv6 link-local peer needs its
// link). The peer's kernel answers: an LB runs nothing for it.
//
// # Contract
//
//   - One goroutine, started by New and stopped by Close (which waits for
//     it), does all the probing: each tick it reads every answer queued on
//     the sockets, judges the probe of the previous tick (answered or lost),
//     then sends the next one. A probe therefore has one interval to be
//     answered, and a late tick (a busy machine) gives it more, never less.
//   - A peer starts Up. It goes Down after Settings.FailuresBeforeDown lost
//     probes in a row; an interval in which a late answer (to an earlier
//     probe) came counts as answered, since the peer is alive. It comes back Up once it has answered
//     Settings.SuccessesBeforeUp probes in a row and the hold-down has
//     passed since it started answering again; a run of FailuresBeforeDown
//     losses restarts the hold-down. The hold-down doubles for each down that
//     comes within the longest hold-down of the previous return (a flapping
//     peer), up to 32 times Settings.HoldDown.
//   - The change callback (WithOnChange) gets the changes of one tick
//     together, from the probing goroutine, in order; it must not block
//     (the next tick waits for it) and must not call Close (which waits for
//     that goroutine).
//   - Watch replaces the set of peers; a peer kept keeps its state and
//     counters, a peer added starts Up, a peer removed is forgotten without
//     a change.
//   - Settings.Off turns the probing off: peers are accepted and reported
//     Unchecked, and nothing is ever sent.
package nexthopcheck
