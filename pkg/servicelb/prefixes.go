package servicelb

import (
	"fmt"
	"net/netip"
)

// MinPrefixBits is the shortest prefix length a service prefix may have, in
// either family: a wider route (0.0.0.0/1 with 128.0.0.0/1 replace the
// default route without being one) would take the targets' traffic to
// the proxy.
const MinPrefixBits = 8

// CheckServicePrefix says what is wrong with p as a service prefix (a
// route the targets get via their gateway), nil when nothing is.
func CheckServicePrefix(p netip.Prefix) error {
	switch {
	case p.Masked() != p:
		return fmt.Errorf("%q has host bits set; did you mean %s?", p.String(), p.Masked())
	case p.Bits() == 0:
		return fmt.Errorf("%s is a default route: every target would send all its traffic to the proxy", p)
	case p.Bits() < MinPrefixBits:
		return fmt.Errorf("%s is shorter than /%d: a route that wide takes over most of the targets' default route", p, MinPrefixBits)
	}
	return nil
}

// HostPrefixes are the host prefixes of the services' IPs, each once, in
// the order of svcs: the routes handed to targets when no service prefix
// is configured.
func HostPrefixes(svcs []Service) []netip.Prefix {
	var out []netip.Prefix
	seen := map[netip.Addr]bool{}
	for _, s := range svcs {
		a := s.IP.Unmap()
		if !a.IsValid() || seen[a] {
			continue
		}
		seen[a] = true
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out
}
