package ipam

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// u128 is an IPv6-sized unsigned integer for address arithmetic.
type u128 struct{ hi, lo uint64 }

func addrToU128(a netip.Addr) u128 {
	b := a.As16()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func (u u128) add(v u128) u128 {
	lo, carry := bits.Add64(u.lo, v.lo, 0)
	hi, _ := bits.Add64(u.hi, v.hi, carry)
	return u128{hi, lo}
}

func (u u128) sub(v u128) u128 {
	lo, borrow := bits.Sub64(u.lo, v.lo, 0)
	hi, _ := bits.Sub64(u.hi, v.hi, borrow)
	return u128{hi, lo}
}

func (u u128) shl(n uint) u128 {
	switch {
	case n == 0:
		return u
	case n >= 128:
		return u128{}
	case n >= 64:
		return u128{u.lo << (n - 64), 0}
	}
	return u128{u.hi<<n | u.lo>>(64-n), u.lo << n}
}

func (u u128) shr(n uint) u128 {
	switch {
	case n == 0:
		return u
	case n >= 128:
		return u128{}
	case n >= 64:
		return u128{0, u.hi >> (n - 64)}
	}
	return u128{u.hi >> n, u.lo>>n | u.hi<<(64-n)}
}

// toAddr converts back, as IPv4 when is4.
func (u u128) toAddr(is4 bool) netip.Addr {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], u.hi)
	binary.BigEndian.PutUint64(b[8:], u.lo)
	a := netip.AddrFrom16(b)
	if is4 {
		return a.Unmap()
	}
	return a
}

// subPrefix returns the index-th subnet of length sublen inside parent.
func subPrefix(parent netip.Prefix, sublen int, index uint64) netip.Prefix {
	shift := uint(parent.Addr().BitLen() - sublen)
	base := addrToU128(parent.Masked().Addr())
	a := base.add(u128{0, index}.shl(shift)).toAddr(parent.Addr().Is4())
	return netip.PrefixFrom(a, sublen)
}

// subIndex is the inverse of subPrefix: the index of child inside parent, and
// whether child is an aligned subnet of length sublen inside parent whose
// index fits in a uint64.
func subIndex(parent netip.Prefix, sublen int, child netip.Prefix) (uint64, bool) {
	if child.Bits() != sublen || child.Masked() != child || !parent.Contains(child.Addr()) ||
		parent.Addr().Is4() != child.Addr().Is4() {
		return 0, false
	}
	shift := uint(parent.Addr().BitLen() - sublen)
	off := addrToU128(child.Addr()).sub(addrToU128(parent.Masked().Addr())).shr(shift)
	if off.hi != 0 {
		return 0, false
	}
	return off.lo, true
}

// slotCount is the number of subnets of length sublen in a prefix of length
// bits, capped at 1<<63 (more than anything will ever allocate).
func slotCount(bits, sublen int) uint64 {
	if sublen-bits >= 63 {
		return 1 << 63
	}
	return 1 << uint(sublen-bits)
}
