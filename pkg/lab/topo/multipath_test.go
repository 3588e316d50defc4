package topo_test

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// TestRouterSysctlsKeepAConnectionOnItsTarget: a router with RouterSysctls
// spreads connections from a client over two targets of one VIP, and a
// connection stays on its target after its segments time out (the client
// draws a new socket hash then). Behind the L4 policy (1), which takes the
// hash a packet carries across a veth, about half the connections moved
// to the other target and were reset.
func TestRouterSysctlsKeepAConnectionOnItsTarget(t *testing.T) {
	cli, rtr := testutil.NewNetNS(t, "mp-c"), testutil.NewNetNS(t, "mp-r")
	tgts := []*testutil.NetNS{testutil.NewNetNS(t, "mp-a"), testutil.NewNetNS(t, "mp-b")}
	require.NoError(t, topo.ApplySysctls(rtr.Path(), topo.RouterSysctls))
	wire(t, rtr, cli, "c", 0)
	for i, tgt := range tgts {
		wire(t, rtr, tgt, "t", i+1)
		tgt.MustExec(t, "ip", "addr", "add", "20.0.0.1/32", "dev", "lo")
		tgt.MustExec(t, "ip", "addr", "add", "2001:db8::1/128", "dev", "lo")
	}
	rtr.MustExec(t, "ip", "route", "add", "20.0.0.1/32", "nexthop", "via", "10.0.1.2", "nexthop", "via", "10.0.2.2")
	rtr.MustExec(t, "ip", "-6", "route", "add", "2001:db8::1/128", "nexthop", "via", "fd00:1::2", "nexthop", "via", "fd00:2::2")

	for _, vip := range []string{"20.0.0.1", "2001:db8::1"} {
		t.Run(vip, func(t *testing.T) {
			addr := netip.AddrPortFrom(netip.MustParseAddr(vip), 5000)
			accepted := make([]atomic.Int32, len(tgts))
			for i, tgt := range tgts {
				serveEcho(t, tgt, addr, &accepted[i])
			}
			conns := dialEach(t, cli, addr, 20)
			for i := range accepted {
				require.Positive(t, accepted[i].Load(), "target %d has connections: the router spreads them", i)
			}

			// Every segment dropped for 2.5 s: each connection's data
			// times out and is sent again, with a new socket hash.
			rtr.MustExec(t, "nft", "add table inet mp-block; add chain inet mp-block f { type filter hook forward priority 0; policy drop; }")
			for _, c := range conns {
				_, err := c.Write([]byte("again\n"))
				require.NoError(t, err)
			}
			time.Sleep(2500 * time.Millisecond)
			rtr.MustExec(t, "nft", "delete table inet mp-block")
			lost := 0
			for _, c := range conns {
				require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
				if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "again\n" {
					lost++
				}
			}
			require.Zero(t, lost, "connections (of %d) reset or lost after a retransmission timeout", len(conns))
		})
	}
}

// wire links the router to ns with a veth (ns's end "e0"), 10.0.<n>.0/24 and
// fd00:<n>::/64: the router .1, ns .2 with its default routes via the router.
func wire(t *testing.T, rtr, ns *testutil.NetNS, prefix string, n int) {
	t.Helper()
	name := fmt.Sprintf("%s%d", prefix, n)
	rtr.MustExec(t, "ip", "link", "add", name, "type", "veth", "peer", "name", "e0", "netns", ns.Name)
	v4, v6 := fmt.Sprintf("10.0.%d.", n), fmt.Sprintf("fd00:%d::", n)
	rtr.MustExec(t, "ip", "addr", "add", v4+"1/24", "dev", name)
	rtr.MustExec(t, "ip", "addr", "add", v6+"1/64", "dev", name, "nodad")
	rtr.MustExec(t, "ip", "link", "set", name, "up")
	ns.MustExec(t, "ip", "addr", "add", v4+"2/24", "dev", "e0")
	ns.MustExec(t, "ip", "addr", "add", v6+"2/64", "dev", "e0", "nodad")
	ns.MustExec(t, "ip", "link", "set", "e0", "up")
	ns.MustExec(t, "ip", "link", "set", "lo", "up")
	ns.MustExec(t, "ip", "route", "add", "default", "via", v4+"1")
	ns.MustExec(t, "ip", "-6", "route", "add", "default", "via", v6+"1")
}

// serveEcho echoes lines on addr in ns, counting the connections it
// accepts, until the end of the test.
func serveEcho(t *testing.T, ns *testutil.NetNS, addr netip.AddrPort, accepted *atomic.Int32) {
	t.Helper()
	var l net.Listener
	require.NoError(t, ns.Do(func() (err error) {
		l, err = net.Listen("tcp", addr.String())
		return err
	}))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

// dialEach opens n connections to addr from ns, each answered once, and
// closes them at the end of the test.
func dialEach(t *testing.T, ns *testutil.NetNS, addr netip.AddrPort, n int) []net.Conn {
	t.Helper()
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for range n {
		var c net.Conn
		require.NoError(t, ns.Do(func() (err error) {
			c, err = net.DialTimeout("tcp", addr.String(), 10*time.Second)
			return err
		}))
		conns = append(conns, c)
		_, err := c.Write([]byte("hello\n"))
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		line, err := bufio.NewReader(c).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "hello\n", line)
	}
	return conns
}
