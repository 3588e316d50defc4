package proxy

import (
	"fmt"
	"net/netip"
)

// Default bounds of a VIP's width: no VIP covers more than 256 addresses,
// in either family.
const (
	DefaultVIPMinPrefixLen4 = 24
	DefaultVIPMinPrefixLen6 = 120
)

// VIPPolicy is what a VIP may not be, beyond a valid prefix that is not the
// conduit's node subnet.
type VIPPolicy struct {
	// Forbidden are the cluster's and the node's own networks (pod,
	// service and node networks, the IPAM's pools): a VIP that overlaps
	// one is refused. Loopback, link-local, multicast and unspecified
	// networks are always refused.
	Forbidden []netip.Prefix
	// MinPrefixLen4 and MinPrefixLen6 bound a VIP's width: a wider VIP
	// (a shorter prefix) is refused. Zero: the defaults above.
	MinPrefixLen4, MinPrefixLen6 int
}

func (v VIPPolicy) withDefaults() VIPPolicy {
	if v.MinPrefixLen4 <= 0 {
		v.MinPrefixLen4 = DefaultVIPMinPrefixLen4
	}
	if v.MinPrefixLen6 <= 0 {
		v.MinPrefixLen6 = DefaultVIPMinPrefixLen6
	}
	return v
}

// reserved are the networks no VIP may overlap, whatever the policy.
var reserved = []struct {
	name   string
	prefix netip.Prefix
}{
	{"the unspecified network", netip.MustParsePrefix("0.0.0.0/8")},
	{"loopback", netip.MustParsePrefix("127.0.0.0/8")},
	{"link-local (cloud metadata)", netip.MustParsePrefix("169.254.0.0/16")},
	{"multicast", netip.MustParsePrefix("224.0.0.0/4")},
	{"the unspecified address", netip.MustParsePrefix("::/128")},
	{"loopback", netip.MustParsePrefix("::1/128")},
	{"IPv4-mapped addresses", netip.MustParsePrefix("::ffff:0:0/96")},
	{"link-local", netip.MustParsePrefix("fe80::/10")},
	{"multicast", netip.MustParsePrefix("ff00::/8")},
}

// check refuses v when the policy does, naming v and what it overlaps or
// the bound it exceeds.
func (v VIPPolicy) check(vip netip.Prefix) error {
	minLen, fam := v.MinPrefixLen4, "IPv4"
	if vip.Addr().Is6() {
		minLen, fam = v.MinPrefixLen6, "IPv6"
	}
	if vip.Bits() < minLen {
		return fmt.Errorf("VIP %v: wider than /%d, the widest %s VIP allowed (%d addresses at most)", vip, minLen, fam, 1<<min(vip.Addr().BitLen()-minLen, 62))
	}
	for _, r := range reserved {
		if r.prefix.Overlaps(vip) {
			return fmt.Errorf("VIP %v: overlaps %s %v", vip, r.name, r.prefix)
		}
	}
	for _, f := range v.Forbidden {
		if f.Masked().Overlaps(vip) {
			return fmt.Errorf("VIP %v: overlaps the cluster's or the node's network %v", vip, f.Masked())
		}
	}
	return nil
}
