package dataplane

import (
	"encoding/binary"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Ether types and ICMPv6 types the check chain tells apart.
const (
	etherARP      = 0x0806
	etherIPv4     = 0x0800
	etherIPv6     = 0x86dd
	icmp6RA       = 134
	icmp6NA       = 136
	icmp6Redirect = 137
)

func etherSaddr() *expr.Payload {
	return &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: 6, Len: 6}
}

func isEtherType(t uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: 12, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, t)},
	}
}

// network loads len bytes at off of the network header (ARP's or IP's).
func network(off, n uint32) *expr.Payload {
	return &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n}
}

func notIn(s string) *expr.Lookup { return &expr.Lookup{SourceRegister: 1, SetName: s, Invert: true} }

func drop() *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictDrop} }

func accept() *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictAccept} }

func isICMPv6(typ byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_ICMPV6}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{typ}},
	}
}

func rule(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func one(e ...expr.Any) []expr.Any { return e }

// macRules hold a port to one source MAC: the one it holds, else one no
// one has claimed, taken now (the set holds one, so a second fails and
// falls to the drop).
func macRules(mac, claimed *nftables.Set, check string) [][]expr.Any {
	toCheck := &expr.Verdict{Kind: expr.VerdictGoto, Chain: check}
	return [][]expr.Any{
		one(etherSaddr(), &expr.Lookup{SourceRegister: 1, SetName: mac.Name, SetID: mac.ID}, toCheck),
		one(etherSaddr(), &expr.Lookup{SourceRegister: 1, SetName: claimed.Name, SetID: claimed.ID}, drop()),
		one(etherSaddr(),
			&expr.Dynset{SrcRegKey: 1, SetName: mac.Name, SetID: mac.ID, Operation: uint32(unix.NFT_DYNSET_OP_ADD)},
			&expr.Dynset{SrcRegKey: 1, SetName: claimed.Name, SetID: claimed.ID, Operation: uint32(unix.NFT_DYNSET_OP_ADD)},
			toCheck),
		one(drop()),
	}
}

// checkRules hold a port (whose frame's MAC is its own) to its addresses.
func checkRules(idx int, mac *nftables.Set) [][]expr.Any {
	v4s, v6s := srcSetName(v4, idx), srcSetName(v6, idx)
	arp, ip4, ip6 := isEtherType(etherARP), isEtherType(etherIPv4), isEtherType(etherIPv6)
	return [][]expr.Any{
		// ARP: the sender's MAC and address are the port's.
		rule(arp, one(network(8, 6), notIn(mac.Name), drop())),
		rule(arp, one(network(14, 4), notIn(v4s), drop())),
		rule(arp, one(accept())),
		rule(ip4, one(network(12, 4), notIn(v4s), drop())),
		rule(ip4, one(accept())),
		rule(ip6, one(network(8, 16), notIn(v6s), drop())),
		// No target is a router.
		rule(ip6, isICMPv6(icmp6RA), one(drop())),
		rule(ip6, isICMPv6(icmp6Redirect), one(drop())),
		// A neighbour advertisement speaks for the port's own addresses only.
		rule(ip6, isICMPv6(icmp6NA), one(
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 8, Len: 16},
			notIn(v6s), drop())),
		rule(ip6, one(accept())),
		one(drop()),
	}
}

// intervalElements encodes the prefixes of family f as the
// elements of an interval set: merged ranges, each a start and an end
// (the first address past it) flagged as such, the end left out for a
// range that reaches the family's last address.
func intervalElements(f family, ps []netip.Prefix) []nftables.SetElement {
	type span struct{ lo, hi netip.Addr }
	all := make([]span, 0, len(ps))
	for _, p := range ps {
		p = p.Masked()
		all = append(all, span{p.Addr(), lastAddr(p)})
	}
	slices.SortFunc(all, func(a, b span) int { return a.lo.Compare(b.lo) })
	var spans []span
	for _, s := range all {
		if n := len(spans); n > 0 && spans[n-1].hi.Next().IsValid() && s.lo.Compare(spans[n-1].hi.Next()) <= 0 {
			if s.hi.Compare(spans[n-1].hi) > 0 {
				spans[n-1].hi = s.hi
			}
			continue
		}
		spans = append(spans, s)
	}
	zero := netip.IPv4Unspecified()
	if f == v6 {
		zero = netip.IPv6Unspecified()
	}
	var out []nftables.SetElement
	if len(spans) > 0 && spans[0].lo != zero {
		out = append(out, nftables.SetElement{Key: zero.AsSlice(), IntervalEnd: true})
	}
	for _, s := range spans {
		out = append(out, nftables.SetElement{Key: s.lo.AsSlice()})
		if end := s.hi.Next(); end.IsValid() {
			out = append(out, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return out
}

// lastAddr is the last address of p (masked).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
