// Package impair breaks the datapath of a lab namespace without anything
// else noticing, and mends it: one nftables table of its own in the
// namespace drops every packet (or a random share of them) that comes in on,
// or goes out of, any link but those kept. The links stay up with their
// addresses, the processes run, NSM sees nothing: what a node cut off
// behind a live connection, or a broken tunnel between forwarders, looks
// like from the proxy's side.
//
// It is the lab's (`lab break`, `lab mend`) and its tests'; the product
// never imports it.
package impair
