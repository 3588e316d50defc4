// Package egress owns the NSM client element that reports whether the proxy
// has a way out: it tracks the ids of the established connections to load
// balancers and reports serving while at least one exists.
package egress
