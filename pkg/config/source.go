// Package config owns the sources of the proxy's VIP and conduit
// configuration: a client of the NSP ConfigurationManager watch (Causeway's
// cmd/nsp or Meridio's NSP, same wire contract) and a static YAML file in the
// format of package config/file. Both deliver complete, normalised VIP lists
// through the VIPSource interface.
package config

import (
	"context"
	"fmt"
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

// ParseVIP parses a VIP address as the NSP API carries it: a prefix in CIDR
// notation, or a plain address, which stands for a /32 or /128. Host bits of a
// prefix are cleared (40.0.0.1/24 becomes 40.0.0.0/24).
func ParseVIP(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("VIP address %q is neither a prefix nor an address", s)
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("VIP address %q has a zone", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
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
