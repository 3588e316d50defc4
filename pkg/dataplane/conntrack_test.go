package dataplane

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	mdnetlink "github.com/mdlayher/netlink"
	"github.com/stretchr/testify/require"
	"github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/conntrackflush"
)

// ctInsert creates a UDP conntrack entry in ns with the conntrack tool.
func ctInsert(t *testing.T, ns *testutil.NetNS, src, dst string, sport, dport string) {
	t.Helper()
	ns.MustExec(t, "conntrack", "-I", "-p", "udp", "-s", src, "-d", dst, "--sport", sport, "--dport", dport, "-t", "300")
}

// ctList returns the conntrack table of ns, one entry a line.
func ctList(t *testing.T, ns *testutil.NetNS) string {
	t.Helper()
	out := ns.MustExec(t, "conntrack", "-L", "-f", "ipv4")
	out += ns.MustExec(t, "conntrack", "-L", "-f", "ipv6")
	return out
}

func TestConntrackFlush(t *testing.T) {
	ns := testutil.NewNetNS(t, "ct")
	dp := newDP(t, ns, Options{})
	s := State{
		BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24"), mp("fd00:cafe::1/64")},
		Nexthops:    []netip.Addr{ma("192.0.2.11"), ma("192.0.2.12")},
		VIPs:        []netip.Prefix{mp("203.0.113.10/32"), mp("203.0.113.11/32"), mp("2001:db8:100::10/128")},
	}
	require.NoError(t, dp.Apply(s))
	// Flows from and to each VIP, and one to an LB.
	ctInsert(t, ns, "203.0.113.10", "198.51.100.1", "1000", "53")
	ctInsert(t, ns, "198.51.100.2", "203.0.113.10", "1001", "53")
	ctInsert(t, ns, "203.0.113.11", "198.51.100.1", "1002", "53")
	ctInsert(t, ns, "2001:db8:100::10", "2001:db8:ffff::1", "1003", "53")
	ctInsert(t, ns, "192.0.2.21", "192.0.2.11", "1004", "53")
	ctInsert(t, ns, "192.0.2.21", "192.0.2.12", "1005", "53")
	require.Equal(t, 6, strings.Count(ctList(t, ns), "udp"))

	// Removing a VIP and an LB flushes their entries; the others stay.
	s.VIPs = []netip.Prefix{mp("203.0.113.11/32"), mp("2001:db8:100::10/128")}
	s.Nexthops = []netip.Addr{ma("192.0.2.12")}
	require.NoError(t, dp.Apply(s))
	out := ctList(t, ns)
	require.NotContains(t, out, "203.0.113.10", "entries of the removed VIP are gone")
	require.NotContains(t, out, "192.0.2.11 ", "entries of the removed LB are gone")
	require.Contains(t, out, "src=203.0.113.11")
	require.Contains(t, out, "src=2001:db8:100::10")
	require.Contains(t, out, "dst=192.0.2.12 ")
	require.Equal(t, 3, strings.Count(out, "udp"))

	// Explicit flushes: by address (as reply destination too) and prefix.
	require.NoError(t, dp.FlushConntrack(ma("2001:db8:100::10")))
	require.NotContains(t, ctList(t, ns), "2001:db8:100::10")
	require.NoError(t, dp.FlushConntrackPrefix(mp("192.0.2.0/24")))
	out = ctList(t, ns)
	require.NotContains(t, out, "192.0.2.")
	require.Contains(t, out, "src=203.0.113.11")
	require.Equal(t, uint64(5), dp.Stats().ConntrackDeleted)

	// The same state again flushes nothing; a VIP added back keeps the
	// entries it gets, and a later removal of another VIP leaves them.
	ctInsert(t, ns, "203.0.113.10", "198.51.100.1", "1006", "53")
	require.NoError(t, dp.Apply(s))
	s.VIPs = append(s.VIPs, mp("203.0.113.10/32"))
	require.NoError(t, dp.Apply(s))
	s.VIPs = []netip.Prefix{mp("203.0.113.10/32")}
	require.NoError(t, dp.Apply(s))
	out = ctList(t, ns)
	require.Contains(t, out, "src=203.0.113.10")
	require.NotContains(t, out, "src=203.0.113.11", "the removed VIP's entries go")
	require.Equal(t, uint64(6), dp.Stats().ConntrackDeleted)
}

// ctDial opens a conntrack connection in ns, closed at the end of the test.
func ctDial(t testing.TB, ns *testutil.NetNS) *conntrack.Conn {
	t.Helper()
	c, err := conntrack.Dial(&mdnetlink.Config{NetNS: int(ns.Handle)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ctCreateUDP creates one UDP conntrack entry in process (the conntrack
// tool costs a process per entry; benchmarks create tens of thousands).
func ctCreateUDP(c *conntrack.Conn, src, dst netip.Addr, sport, dport uint16) error {
	return c.Create(conntrack.NewFlow(unix.IPPROTO_UDP, 0, src, dst, sport, dport, 300, 0))
}

// A flush that fails is not lost: the reconciler runs it again, without
// waiting for another Apply. (That a Flusher dials again after a failed
// delete is conntrackflush's test.)
func TestConntrackFlushRetried(t *testing.T) {
	ns := testutil.NewNetNS(t, "ct")
	ct := &conntrackflush.Fake{Fail: 1, Err: errors.New("broken conntrack socket"), Next: conntrackflush.New(ns.Handle)}
	dp := newDP(t, ns, Options{Conntrack: ct})
	s := State{BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24")}, VIPs: []netip.Prefix{mp("203.0.113.10/32")}}
	require.NoError(t, dp.Apply(s))
	ctInsert(t, ns, "203.0.113.10", "198.51.100.1", "1000", "53")

	s.VIPs = nil
	require.NoError(t, dp.Apply(s))
	require.Eventually(t, func() bool {
		return !strings.Contains(ctList(t, ns), "203.0.113.10") && dp.Stats().ConntrackDeleted == 1 && !dp.ctFailing.Load()
	}, time.Minute, 20*time.Millisecond, "the failed flush is retried")
	require.Len(t, ct.Flushes(), 2)
}

// A flush keeps the entries of a prefix that the applied state wants
// again by the time its dump is done (a VIP added back while the flush of
// its removal ran).
func TestConntrackFlushKeepsWantedAgain(t *testing.T) {
	ns := testutil.NewNetNS(t, "ct")
	dp := newDP(t, ns, Options{})
	s := State{BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24")}, Nexthops: []netip.Addr{ma("192.0.2.11")},
		VIPs: []netip.Prefix{mp("203.0.113.10/32")}}
	require.NoError(t, dp.Apply(s))
	ctInsert(t, ns, "203.0.113.10", "198.51.100.1", "1000", "53")
	ctInsert(t, ns, "192.0.2.21", "192.0.2.11", "1001", "53")
	ctInsert(t, ns, "203.0.113.12", "198.51.100.1", "1002", "53")

	due := []netip.Prefix{mp("192.0.2.11/32"), mp("203.0.113.10/32"), mp("203.0.113.12/32")}
	require.True(t, dp.flushConntrackLogged(due))
	out := ctList(t, ns)
	require.Contains(t, out, "src=203.0.113.10", "a wanted VIP keeps its entries")
	require.Contains(t, out, "dst=192.0.2.11 ", "a wanted nexthop keeps its entries")
	require.NotContains(t, out, "203.0.113.12", "the others go")
}

// A flush whose retry failed too is retried again after its pause, also
// when the reconciler woke for something else meanwhile.
func TestConntrackFlushRetryOutlivesOtherWakes(t *testing.T) {
	ns := testutil.NewNetNS(t, "ct")
	// The Apply's flush and the reconciler's first retry fail.
	ct := &conntrackflush.Fake{Fail: 2, Err: unix.ENOBUFS, Next: conntrackflush.New(ns.Handle)}
	dp := newDP(t, ns, Options{ResyncInterval: time.Hour, Conntrack: ct})
	s := State{BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24")}, VIPs: []netip.Prefix{mp("203.0.113.10/32")}}
	require.NoError(t, dp.Apply(s))
	ctInsert(t, ns, "203.0.113.10", "198.51.100.1", "1000", "53")

	s.VIPs = nil
	require.NoError(t, dp.Apply(s))
	require.Eventually(t, func() bool { return len(ct.Flushes()) >= 2 }, time.Minute, time.Millisecond)
	dp.wake() // a wake for something else during the retry's pause
	require.Eventually(t, func() bool { return !strings.Contains(ctList(t, ns), "203.0.113.10") },
		time.Minute, 20*time.Millisecond, "the flush is retried after its pause")
}
