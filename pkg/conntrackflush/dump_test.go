package conntrackflush

import (
	"net/netip"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/require"
)

// ctEntry encodes a conntrack entry's payload (nfgenmsg, then the original
// and reply tuples with their addresses) as the kernel sends it.
func ctEntry(t *testing.T, origSrc, origDst, replySrc, replyDst netip.Addr) []byte {
	t.Helper()
	tuple := func(src, dst netip.Addr) func(*netlink.AttributeEncoder) error {
		return func(ae *netlink.AttributeEncoder) error {
			ae.Nested(ctaTupleIP, func(ae *netlink.AttributeEncoder) error {
				s, d := uint16(ctaIPv4Src), uint16(ctaIPv4Dst)
				if src.Is6() {
					s, d = ctaIPv6Src, ctaIPv6Dst
				}
				ae.Bytes(s, src.AsSlice())
				ae.Bytes(d, dst.AsSlice())
				return nil
			})
			ae.Nested(2, func(ae *netlink.AttributeEncoder) error { ae.Uint8(1, 17); return nil }) // CTA_TUPLE_PROTO
			return nil
		}
	}
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(7, 300) // CTA_TIMEOUT, before the tuples
	ae.Nested(ctaTupleOrig, tuple(origSrc, origDst))
	ae.Nested(ctaTupleReply, tuple(replySrc, replyDst))
	b, err := ae.Encode()
	require.NoError(t, err)
	return append([]byte{2, 0, 0, 0}, b...)
}

// TestAnyTupleAddr: the raw look finds every tuple address, of either
// family, and accepts what it cannot read instead of failing on it.
func TestAnyTupleAddr(t *testing.T) {
	a := netip.MustParseAddr
	v4 := ctEntry(t, a("198.51.100.1"), a("203.0.113.10"), a("192.0.2.5"), a("198.51.100.1"))
	v6 := ctEntry(t, a("2001:db8::1"), a("2001:db8:20::1"), a("fd00::5"), a("2001:db8::1"))
	is := func(want netip.Addr) func(netip.Addr) bool { return func(x netip.Addr) bool { return x == want } }
	for _, want := range []string{"198.51.100.1", "203.0.113.10", "192.0.2.5"} {
		require.True(t, anyTupleAddr(v4, is(a(want))), want)
	}
	for _, want := range []string{"2001:db8::1", "2001:db8:20::1", "fd00::5"} {
		require.True(t, anyTupleAddr(v6, is(a(want))), want)
	}
	require.False(t, anyTupleAddr(v4, is(a("192.0.2.6"))))
	require.False(t, anyTupleAddr(v6, is(a("fd00::6"))))
	for name, bad := range map[string][]byte{
		"empty":           nil,
		"no attributes":   {2, 0, 0, 0, 1},
		"a length past":   append([]byte{2, 0, 0, 0}, 0xff, 0, 1, 0),
		"a length short":  append([]byte{2, 0, 0, 0}, 2, 0, 1, 0),
		"a cut tuple":     v4[:len(v4)-3],
		"a cut attribute": v4[:9],
	} {
		require.True(t, anyTupleAddr(bad, is(a("192.0.2.6"))), "%s: left to the decoder", name)
	}
}
