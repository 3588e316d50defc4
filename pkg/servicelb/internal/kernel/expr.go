package kernel

import (
	"encoding/binary"
	"net/netip"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/pkg/servicelb"
)

// NFProto is the netfilter family of addr.
func NFProto(addr netip.Addr) uint32 {
	if addr.Is4() {
		return unix.NFPROTO_IPV4
	}
	return unix.NFPROTO_IPV6
}

// L4Proto is the IP protocol number of p.
func L4Proto(p servicelb.Protocol) byte {
	if p == servicelb.UDP {
		return unix.IPPROTO_UDP
	}
	return unix.IPPROTO_TCP
}

func port16(p uint16) []byte { return binary.BigEndian.AppendUint16(nil, p) }

func cmpEq(data []byte) *expr.Cmp { return &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data} }

// MatchFamily matches packets of addr's family (needed in inet tables
// before any address load).
func MatchFamily(addr netip.Addr) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		cmpEq([]byte{byte(NFProto(addr))}),
	}
}

func addrOffset(addr netip.Addr, src bool) (off, n uint32) {
	switch {
	case addr.Is4() && src:
		return 12, 4
	case addr.Is4():
		return 16, 4
	case src:
		return 8, 16
	default:
		return 24, 16
	}
}

// LoadSaddr loads the source address of a packet of fam's family into reg.
func LoadSaddr(fam netip.Addr, reg uint32) *expr.Payload {
	off, n := addrOffset(fam, true)
	return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n}
}

// LoadDaddr loads the destination address of a packet of fam's family.
func LoadDaddr(fam netip.Addr, reg uint32) *expr.Payload {
	off, n := addrOffset(fam, false)
	return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n}
}

// MatchService matches packets to addr:port over proto (family included).
func MatchService(addr netip.AddrPort, proto servicelb.Protocol) []expr.Any {
	out := MatchFamily(addr.Addr())
	return append(out,
		LoadDaddr(addr.Addr(), 1), cmpEq(addr.Addr().AsSlice()),
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, cmpEq([]byte{L4Proto(proto)}),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		cmpEq(port16(addr.Port())),
	)
}

// MatchPort matches packets over proto to port (no address).
func MatchPort(port uint16, proto servicelb.Protocol) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, cmpEq([]byte{L4Proto(proto)}),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		cmpEq(port16(port)),
	}
}

// DNAT rewrites the destination to to.
func DNAT(to netip.AddrPort) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: to.Addr().AsSlice()},
		&expr.Immediate{Register: 2, Data: port16(to.Port())},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: NFProto(to.Addr()), RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}

// Redirect rewrites the destination to the primary address of the
// incoming interface (loopback for local traffic) and port.
func Redirect(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: port16(port)},
		&expr.Redir{RegisterProtoMin: 1, Flags: unix.NF_NAT_RANGE_PROTO_SPECIFIED},
	}
}

// Goto jumps to chain without return.
func Goto(chain string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictGoto, Chain: chain} }

// Jump calls chain.
func Jump(chain string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictJump, Chain: chain} }
