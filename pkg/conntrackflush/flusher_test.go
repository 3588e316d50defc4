package conntrackflush

import (
	"net/netip"
	"testing"

	mdnetlink "github.com/mdlayher/netlink"
	"github.com/stretchr/testify/require"
	"github.com/ti-mo/conntrack"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	mp = netip.MustParsePrefix
	ma = netip.MustParseAddr
)

func TestPrefixMatcher(t *testing.T) {
	m := newPrefixMatcher([]netip.Prefix{mp("203.0.113.10/32"), mp("2001:db8::/64"), mp("192.0.2.0/24")})
	for a, want := range map[string]bool{
		"203.0.113.10": true, "::ffff:203.0.113.10": true, "203.0.113.11": false,
		"2001:db8::5": true, "2001:db8:1::5": false, "192.0.2.200": true, "192.0.3.1": false,
	} {
		require.Equal(t, want, m.match(ma(a)), a)
	}
}

// A flush deletes the entries of its prefixes but those keep keeps; one
// whose deletes failed on a broken socket dials again at the next flush.
func TestFlusher(t *testing.T) {
	ns := testutil.NewNetNS(t, "ctf")
	c, err := conntrack.Dial(&mdnetlink.Config{NetNS: int(ns.Handle)})
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	create := func(src, dst string, sport uint16) {
		t.Helper()
		require.NoError(t, c.Create(conntrack.NewFlow(unix.IPPROTO_UDP, 0, ma(src), ma(dst), sport, 53, 300, 0)))
	}
	count := func() int {
		t.Helper()
		flows, err := c.Dump(nil)
		require.NoError(t, err)
		return len(flows)
	}
	create("203.0.113.10", "198.51.100.1", 1000)
	create("203.0.113.11", "198.51.100.1", 1001)
	create("192.0.2.7", "198.51.100.1", 1002)

	dials := 0
	f := New(ns.Handle, WithDial(func(cfg *mdnetlink.Config) (*conntrack.Conn, error) {
		dials++
		conn, err := conntrack.Dial(cfg)
		if err == nil && dials == 1 {
			_ = conn.Close() // a broken socket: its deletes fail
		}
		return conn, err
	}))
	defer f.Close()
	keep11 := func(fl *conntrack.Flow) bool { return fl.TupleOrig.IP.SourceAddress == ma("203.0.113.11") }
	_, err = f.Flush([]netip.Prefix{mp("203.0.113.0/24")}, keep11)
	require.Error(t, err, "the deletes of a broken socket fail")
	n, err := f.Flush([]netip.Prefix{mp("203.0.113.0/24")}, keep11)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 2, dials, "dialled again after the failed deletes")
	require.Equal(t, 2, count(), "203.0.113.11 kept, 192.0.2.7 not asked for")
}
