// Package traffic holds the lab's traffic generators and checkers, run
// inside a network namespace given by its bind-mount path: batches of TCP
// connections and UDP flows to a VIP that tally which target answered
// (Flows, TCP, UDP), a continuous prober that opens a new short flow every
// few milliseconds and measures failover gaps and outages (Prober, Series),
// target-originated egress flows with a VIP source and a listener that
// records on which interface each one arrived (SendEgress, EgressListener),
// a continuous egress prober judged by that listener (EgressProber),
// TCP throughput over an echo service (Throughput) and interface packet
// counters (LinkStats).
//
// Sockets are created on an OS thread switched into the namespace (see
// topo.Do); they keep that namespace after the thread switches back.
package traffic
