package nspwatch

import (
	"fmt"
	"net/netip"
)

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
