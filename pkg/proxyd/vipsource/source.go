// Package vipsource owns the sources of the proxy's VIPs: the
// configuration server's VIP watch (NSPSource, on pkg/nspwatch) and a
// static YAML file in the configuration server's format (FileSource, on
// pkg/nspd/configfile). Both deliver complete, normalised VIP lists through
// the VIPSource interface.
package vipsource

import (
	"context"
	"net/netip"
	"slices"
)

// VIPSource delivers the VIPs of one trench.
type VIPSource interface {
	// Run calls update with the complete VIP list once it is first known and
	// again each time it changes, until ctx is done. The list is sorted and
	// holds no duplicates; it may be empty. update runs on Run's goroutine,
	// one call at a time. Run returns nil when ctx is done and an error only
	// when it cannot start.
	Run(ctx context.Context, update func([]netip.Prefix)) error
}

// normalize sorts prefixes and removes duplicates, in place.
func normalize(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, netip.Prefix.Compare)
	return slices.Compact(ps)
}

// dedup wraps update so that it is called for the first list and then only
// for lists that differ from the previous one.
func dedup(update func([]netip.Prefix)) func([]netip.Prefix) {
	var last []netip.Prefix
	sent := false
	return func(ps []netip.Prefix) {
		ps = normalize(ps)
		if sent && slices.Equal(ps, last) {
			return
		}
		last, sent = ps, true
		update(slices.Clone(ps))
	}
}
