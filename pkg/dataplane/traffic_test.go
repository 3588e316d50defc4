package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/testutil"
)

// flowCounter counts the distinct source ports of the datagrams a UDP
// socket receives.
type flowCounter struct {
	mu    sync.Mutex
	ports map[int]struct{}
	done  chan struct{}
}

func (c *flowCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ports)
}

func (c *flowCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ports = map[int]struct{}{}
}

// listenFlows opens a UDP socket in ns (the socket stays bound to ns) and
// counts what it receives from a goroutine outside the namespace.
func listenFlows(t *testing.T, ns *testutil.NetNS, network string, port int) *flowCounter {
	t.Helper()
	conn := listenUDP(t, ns, network, port)
	c := &flowCounter{ports: map[int]struct{}{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		buf := make([]byte, 2048)
		for {
			_, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			c.mu.Lock()
			c.ports[from.Port] = struct{}{}
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = conn.Close()
		<-c.done
	})
	return c
}

// listenUDP opens a UDP socket on port in ns, with a receive buffer large
// enough for a test's whole stream; the caller closes it.
func listenUDP(t *testing.T, ns *testutil.NetNS, network string, port int) *net.UDPConn {
	t.Helper()
	var conn *net.UDPConn
	require.NoError(t, ns.Do(func() error {
		var err error
		conn, err = net.ListenUDP(network, &net.UDPAddr{Port: port})
		if err != nil {
			return err
		}
		// Room for every datagram of a burst even if the reader lags on
		// a loaded machine.
		rc, err := conn.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
		}); err != nil {
			return err
		}
		return serr
	}))
	return conn
}

// sendFlows sends one datagram from each of n source ports (firstPort...)
// of src to dst, from ns.
func sendFlows(t *testing.T, ns *testutil.NetNS, src netip.Addr, firstPort, n int, dst netip.AddrPort) {
	t.Helper()
	require.NoError(t, ns.Do(func() error {
		var errs []error
		for i := range n {
			c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, uint16(firstPort+i))))
			if err != nil {
				return err
			}
			if _, err := c.WriteToUDPAddrPort([]byte("flow"), dst); err != nil {
				errs = append(errs, err)
			}
			_ = c.Close()
		}
		return errors.Join(errs...)
	}))
}

// deliverFlows sends the n flows of sendFlows until arrived counts all of
// them: the same source ports again, so that a flow sent twice is one flow
// with one path, and a datagram the busy machine dropped (a full backlog, a
// neighbour entry's queue) is sent again rather than counted as lost.
func deliverFlows(t *testing.T, ns *testutil.NetNS, src netip.Addr, firstPort, n int, dst netip.AddrPort, arrived func() int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for round := 1; ; round++ {
		sendFlows(t, ns, src, firstPort, n, dst)
		settle := time.Now().Add(time.Second)
		for arrived() < n && time.Now().Before(settle) {
			time.Sleep(5 * time.Millisecond)
		}
		if got := arrived(); got >= n {
			if round > 1 {
				t.Logf("%d flows from %s arrived after %d rounds", n, src, round)
			}
			return
		} else if time.Now().After(deadline) {
			require.FailNow(t, "flows lost", "%d of %d flows from %s to %s arrived after %d rounds", got, n, src, dst, round)
		}
	}
}

// topology is a proxy namespace with two LBs and two targets, each joined to
// the proxy by a veth pair whose proxy end is a bridge port.
type topology struct {
	P, LB1, LB2, T1, T2 *testutil.NetNS
	ports               map[string]int // proxy-side port indexes
}

const (
	bridge4 = "192.0.2.1"
	bridge6 = "fd00:cafe::1"
)

var (
	lbAddr4     = []string{"192.0.2.11", "192.0.2.12"}
	lbAddr6     = []string{"fd00:cafe::11", "fd00:cafe::12"}
	targetAddr4 = []string{"192.0.2.21", "192.0.2.22"}
	targetAddr6 = []string{"fd00:cafe::21", "fd00:cafe::22"}
	vip4        = ma("203.0.113.10")
	vip6        = ma("2001:db8:100::10")
	ext4        = ma("198.51.100.1")
	ext6        = ma("2001:db8:ffff::1")
)

func newTopology(t *testing.T) *topology {
	tp := &topology{
		P:     testutil.NewNetNS(t, "px"),
		LB1:   testutil.NewNetNS(t, "lb1"),
		LB2:   testutil.NewNetNS(t, "lb2"),
		T1:    testutil.NewNetNS(t, "t1"),
		T2:    testutil.NewNetNS(t, "t2"),
		ports: map[string]int{},
	}
	for i, lb := range []*testutil.NetNS{tp.LB1, tp.LB2} {
		name := fmt.Sprintf("lb%dp", i+1)
		tp.ports[name] = vethPair(t, tp.P, name, lb, "eth0")
		lb.MustExec(t, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.eth0.rp_filter=0")
		lb.MustExec(t, "ip", "addr", "add", lbAddr4[i]+"/24", "dev", "eth0")
		lb.MustExec(t, "ip", "addr", "add", lbAddr6[i]+"/64", "dev", "eth0", "nodad")
		// The "outside" the VIP traffic goes to: local to every LB.
		lb.MustExec(t, "ip", "addr", "add", ext4.String()+"/32", "dev", "lo")
		lb.MustExec(t, "ip", "addr", "add", ext6.String()+"/128", "dev", "lo", "nodad")
	}
	for i, tg := range []*testutil.NetNS{tp.T1, tp.T2} {
		name := fmt.Sprintf("t%dp", i+1)
		tp.ports[name] = vethPair(t, tp.P, name, tg, "eth0")
		tg.MustExec(t, "ip", "addr", "add", targetAddr4[i]+"/24", "dev", "eth0")
		tg.MustExec(t, "ip", "addr", "add", targetAddr6[i]+"/64", "dev", "eth0", "nodad")
		tg.MustExec(t, "ip", "addr", "add", vip4.String()+"/32", "dev", "lo")
		tg.MustExec(t, "ip", "addr", "add", vip6.String()+"/128", "dev", "lo", "nodad")
		// Like the TAPA: VIP-sourced traffic goes to the bridge address.
		tg.MustExec(t, "ip", "route", "add", "default", "via", bridge4)
		tg.MustExec(t, "ip", "-6", "route", "add", "default", "via", bridge6)
	}
	return tp
}

func (tp *topology) state() State {
	return State{
		BridgeAddrs: []netip.Prefix{mp(bridge4 + "/24"), mp(bridge6 + "/64")},
		Ports: tiedPorts(portsOf(tp.ports["lb1p"], tp.ports["lb2p"], tp.ports["t1p"], tp.ports["t2p"]), map[netip.Addr]int{
			ma(lbAddr4[0]): tp.ports["lb1p"], ma(lbAddr6[0]): tp.ports["lb1p"],
			ma(lbAddr4[1]): tp.ports["lb2p"], ma(lbAddr6[1]): tp.ports["lb2p"],
		}),
		Nexthops: []netip.Addr{ma(lbAddr4[0]), ma(lbAddr4[1]), ma(lbAddr6[0]), ma(lbAddr6[1])},
		VIPs:     []netip.Prefix{netip.PrefixFrom(vip4, 32), netip.PrefixFrom(vip6, 128)},
	}
}

func TestTrafficECMPAndFailover(t *testing.T) {
	tp := newTopology(t)
	dp := newDP(t, tp.P, Options{})
	require.NoError(t, dp.Apply(tp.state()))
	h := handle(t, tp.P)

	// A target reaches an LB through the bridge (L2), both families.
	tp.T1.MustExec(t, "ping", "-c", "1", "-W", "2", lbAddr4[0])
	tp.T2.MustExec(t, "ping", "-c", "1", "-W", "2", lbAddr4[1])
	tp.T1.MustExec(t, "ping", "-6", "-c", "1", "-W", "2", lbAddr6[1])
	// Resolve the neighbours once so that no first datagram waits on
	// ARP/ND.
	tp.T1.MustExec(t, "ping", "-c", "1", "-W", "2", bridge4)
	tp.T1.MustExec(t, "ping", "-6", "-c", "1", "-W", "2", bridge6)
	for i := range 2 {
		tp.P.MustExec(t, "ping", "-c", "1", "-W", "2", lbAddr4[i])
		tp.P.MustExec(t, "ping", "-6", "-c", "1", "-W", "2", lbAddr6[i])
	}

	const flows = 200
	type fam struct {
		name     string
		src, dst netip.Addr
		lbs      [2]*flowCounter
		nhs      func() []netip.Addr
		only2    []netip.Addr
	}
	fams := []*fam{
		{name: "ipv4", src: vip4, dst: ext4,
			nhs:   func() []netip.Addr { return defaultRouteNexthops(t, h, v4, 1, ProtocolCauseway) },
			only2: []netip.Addr{ma(lbAddr4[1])}},
		{name: "ipv6", src: vip6, dst: ext6,
			nhs:   func() []netip.Addr { return defaultRouteNexthops(t, h, v6, 1, ProtocolCauseway) },
			only2: []netip.Addr{ma(lbAddr6[1])}},
	}
	for i, f := range fams {
		network := "udp4"
		if f.src.Is6() {
			network = "udp6"
		}
		f.lbs[0] = listenFlows(t, tp.LB1, network, 5000+i)
		f.lbs[1] = listenFlows(t, tp.LB2, network, 5000+i)
	}
	for i, f := range fams {
		deliverFlows(t, tp.T1, f.src, 40000, flows, netip.AddrPortFrom(f.dst, uint16(5000+i)),
			func() int { return f.lbs[0].count() + f.lbs[1].count() })
		n1, n2 := f.lbs[0].count(), f.lbs[1].count()
		t.Logf("%s: %d flows to LB1, %d to LB2", f.name, n1, n2)
		require.GreaterOrEqual(t, n1, flows/4, "%s: LB1 gets at least 25%% of the flows", f.name)
		require.GreaterOrEqual(t, n2, flows/4, "%s: LB2 gets at least 25%% of the flows", f.name)
	}

	// LB1's port goes: its nexthops leave the routes (Port.Nexthops), and
	// every flow goes to LB2.
	tp.P.MustExec(t, "ip", "link", "del", "lb1p")
	for i, f := range fams {
		eventually(t, func() bool { return slices.Equal(f.only2, f.nhs()) }, "%s: route without LB1", f.name)
		f.lbs[0].reset()
		f.lbs[1].reset()
		deliverFlows(t, tp.T1, f.src, 41000, flows, netip.AddrPortFrom(f.dst, uint16(5000+i)), f.lbs[1].count)
		time.Sleep(20 * time.Millisecond)
		require.Zero(t, f.lbs[0].count(), "%s: nothing reaches LB1", f.name)
	}
}
