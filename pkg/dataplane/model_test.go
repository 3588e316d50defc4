package dataplane

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

func TestNormalize(t *testing.T) {
	d, err := normalize(State{
		BridgeAddrs: []netip.Prefix{mp("::ffff:192.0.2.1/24"), mp("fd00::1/64"), mp("fd00::1/64")},
		Ports:       portsOf(3, 2, 3),
		Nexthops:    []netip.Addr{ma("fd00::3"), ma("192.0.2.12"), ma("::ffff:192.0.2.11"), ma("192.0.2.12"), ma("fd00::2")},
		VIPs:        []netip.Prefix{mp("203.0.113.10/24"), mp("203.0.113.0/24"), mp("2001:db8::1/128")},
	})
	require.NoError(t, err)
	require.Equal(t, map[netip.Prefix]struct{}{mp("192.0.2.1/24"): {}, mp("fd00::1/64"): {}}, d.addrs)
	require.Equal(t, []int{2, 3}, d.ports)
	require.Equal(t, []netip.Addr{ma("192.0.2.11"), ma("192.0.2.12")}, d.nexthops[v4])
	require.Equal(t, []netip.Addr{ma("fd00::2"), ma("fd00::3")}, d.nexthops[v6])
	require.Equal(t, []netip.Prefix{mp("203.0.113.0/24"), mp("2001:db8::1/128")}, d.vips, "VIPs are masked")

	for name, s := range map[string]State{
		"two IPv4 bridge addresses": {BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24"), mp("192.0.2.2/24")}},
		"invalid address":           {BridgeAddrs: []netip.Prefix{{}}},
		"multicast nexthop":         {Nexthops: []netip.Addr{ma("ff02::1")}},
		"zero nexthop":              {Nexthops: []netip.Addr{{}}},
		"default VIP":               {VIPs: []netip.Prefix{mp("0.0.0.0/0")}},
		"bad port":                  {Ports: portsOf(0)},
	} {
		_, err := normalize(s)
		require.Error(t, err, name)
	}
}

func TestSortedMap(t *testing.T) {
	m := newSortedMap[int, string](cmp.Compare[int])
	m.merge([]int{2, 4}, []string{"b", "d"})
	m.merge([]int{1, 3, 5}, []string{"a", "c", "e"})
	m.set(0, "z")
	m.set(3, "C")
	require.Equal(t, []int{0, 1, 2, 3, 4, 5}, m.keys)
	require.Equal(t, []string{"z", "a", "b", "C", "d", "e"}, m.vals)
	m.removeAll([]int{0, 3, 5, 9})
	m.remove(2)
	require.Equal(t, []int{1, 4}, m.keys)
	require.Equal(t, []string{"a", "d"}, m.vals)
	v, ok := m.get(4)
	require.True(t, ok)
	require.Equal(t, "d", v)
	require.False(t, m.has(3))
	require.Equal(t, 2, m.len())
}

// The flush queue keeps what the convergence removed and gives back, once,
// what is not wanted again: a VIP or nexthop added back keeps its entries.
func TestFlushQueue(t *testing.T) {
	var q flushQueue
	q.add(true, mp("203.0.113.9/32")) // flushing disabled
	q.add(false, mp("203.0.113.10/32"), mp("203.0.113.11/32"), mp("192.0.2.11/32"), mp("fd00::11/128"), mp("198.51.100.1/32"))
	next, err := normalize(State{
		Nexthops: []netip.Addr{ma("192.0.2.12"), ma("fd00::11")},
		VIPs:     []netip.Prefix{mp("203.0.113.11/32")},
	})
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{mp("192.0.2.11/32"), mp("198.51.100.1/32"), mp("203.0.113.10/32")}, q.take(next))
	require.Empty(t, q.take(next), "taken once")
}

func TestParseRuleMsg(t *testing.T) {
	hdr := make([]byte, 12)
	hdr[0] = unix.AF_INET6
	hdr[2] = 64  // src_len
	hdr[4] = 252 // table (the attribute wins)
	b := append(hdr, nl.NewRtAttr(nl.FRA_SRC, ma("2001:db8::").AsSlice()).Serialize()...)
	tbl := make([]byte, 4)
	binary.NativeEndian.PutUint32(tbl, 1000)
	b = append(b, nl.NewRtAttr(nl.FRA_TABLE, tbl).Serialize()...)
	b = append(b, nl.NewRtAttr(nl.FRA_PROTOCOL, []byte{202}).Serialize()...)
	ev, err := parseRuleMsg(unix.RTM_DELRULE, b)
	require.NoError(t, err)
	require.Equal(t, ruleEvent{del: true, family: unix.AF_INET6, src: mp("2001:db8::/64"), table: 1000, protocol: 202}, ev)
	_, err = parseRuleMsg(unix.RTM_NEWRULE, hdr[:5])
	require.Error(t, err)
}

func TestRandomMAC(t *testing.T) {
	for range 100 {
		m := RandomMAC()
		require.Len(t, m, 6)
		require.Equal(t, byte(0x02), m[0]&0x03, "locally administered, unicast: %s", m)
	}
}

func TestIfacePath(t *testing.T) {
	require.Equal(t, "/proc/sys/net/ipv4/conf/br.100/rp_filter", ifacePath("net.ipv4.conf.br.100.rp_filter", "br.100"))
	require.Equal(t, "/proc/sys/net/ipv6/conf/bridge0/accept_dad", ifacePath("net.ipv6.conf.bridge0.accept_dad", "bridge0"))
}
