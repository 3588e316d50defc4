package dataplane

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/testutil"
)

// BenchmarkApply measures Apply of 1,000 VIPs and 64 IPv4 nexthops from an
// empty table (full), then of one more VIP (incremental), with the netlink
// writes each costs.
func BenchmarkApply(b *testing.B) {
	ns := testutil.NewNetNS(b, "bapply")
	dp := newDP(b, ns, Options{DisableConntrackFlush: true})
	full := bigState(1000, 64, 0)
	empty := State{BridgeAddrs: full.BridgeAddrs}
	plus := full
	plus.VIPs = append(slices.Clone(full.VIPs), mp("198.51.100.200/32"))

	b.Run("full", func(b *testing.B) { benchApplyChange(b, dp, empty, full) })
	b.Run("add-one-vip", func(b *testing.B) { benchApplyChange(b, dp, full, plus) })
	b.Run("unchanged", func(b *testing.B) {
		require.NoError(b, dp.Apply(full))
		w := dp.Stats().Writes
		b.ResetTimer()
		for range b.N {
			require.NoError(b, dp.Apply(full))
		}
		b.ReportMetric(float64(dp.Stats().Writes-w)/float64(b.N), "writes/op")
	})
}

// benchApplyChange times Apply(to) after Apply(from), untimed, and reports
// the kernel writes of the change.
func benchApplyChange(b *testing.B, dp *Dataplane, from, to State) {
	var writes uint64
	for range b.N {
		b.StopTimer()
		require.NoError(b, dp.Apply(from))
		w := dp.Stats().Writes
		b.StartTimer()
		require.NoError(b, dp.Apply(to))
		b.StopTimer()
		writes += dp.Stats().Writes - w
		b.StartTimer()
	}
	b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
}

// BenchmarkFailover measures, over at least 100 trials, the time from an LB
// port's deletion in the kernel to the ECMP route without its nexthop: the
// link table sees the port go and, the nexthop being tied to the port
// (Port.Nexthops), the Dataplane rewrites the route itself. Reported:
// p50/p99 from the kernel's delete notification to the route notification,
// and from the start of the delete call.
func BenchmarkFailover(b *testing.B) {
	ns := testutil.NewNetNS(b, "bfo")
	dp := newDP(b, ns, Options{})
	h := handle(b, ns)
	lb2 := vethPair(b, ns, "lb2p", nil, "lb2x")
	nh1, nh2 := ma("192.0.2.11"), ma("192.0.2.12")

	// The kernel's notifications, time-stamped on receipt by their own
	// goroutines (the benchmark's goroutine is blocked in the delete call,
	// which returns only after the kernel's RCU grace periods).
	type stamped[T any] struct {
		at time.Time
		u  T
	}
	rawRoutes := make(chan netlink.RouteUpdate, 4096)
	rawLinks := make(chan netlink.LinkUpdate, 4096)
	routes := make(chan stamped[netlink.RouteUpdate], 4096)
	links := make(chan stamped[netlink.LinkUpdate], 4096)
	done := make(chan struct{})
	nsh := ns.Handle
	require.NoError(b, netlink.RouteSubscribeWithOptions(rawRoutes, done, netlink.RouteSubscribeOptions{Namespace: &nsh}))
	require.NoError(b, netlink.LinkSubscribeWithOptions(rawLinks, done, netlink.LinkSubscribeOptions{Namespace: &nsh}))
	go func() {
		defer close(routes)
		for u := range rawRoutes {
			routes <- stamped[netlink.RouteUpdate]{time.Now(), u}
		}
	}()
	go func() {
		defer close(links)
		for u := range rawLinks {
			links <- stamped[netlink.LinkUpdate]{time.Now(), u}
		}
	}()
	b.Cleanup(func() {
		close(done)
		for range routes {
		}
		for range links {
		}
	})
	drain := func() {
		for {
			select {
			case <-routes:
			case <-links:
			default:
				return
			}
		}
	}

	trials := max(b.N, 100)
	fromNotif := make([]time.Duration, 0, trials)
	fromCall := make([]time.Duration, 0, trials)
	b.ResetTimer()
	for i := range trials {
		b.StopTimer()
		name := fmt.Sprintf("lb1p%d", i)
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "x"}
		require.NoError(b, h.LinkAdd(veth))
		l, err := h.LinkByName(name)
		require.NoError(b, err)
		require.NoError(b, h.LinkSetUp(l))
		lb1 := l.Attrs().Index
		require.NoError(b, dp.Apply(State{
			BridgeAddrs: []netip.Prefix{mp("192.0.2.1/24")},
			Ports:       tiedPorts(portsOf(lb1, lb2), map[netip.Addr]int{nh1: lb1, nh2: lb2}),
			Nexthops:    []netip.Addr{nh1, nh2},
		}))
		require.Equal(b, []netip.Addr{nh1, nh2}, defaultRouteNexthops(b, h, v4, 1, ProtocolCauseway))
		time.Sleep(2 * time.Millisecond)
		drain()
		b.StartTimer()

		t0 := time.Now()
		require.NoError(b, h.LinkDel(l))
		var tDel, tRoute time.Time
		timeout := time.After(time.Minute)
		for tDel.IsZero() || tRoute.IsZero() {
			select {
			case s := <-links:
				u := s.u
				if u.Header.Type == unix.RTM_DELLINK && int(u.Index) == lb1 && u.IfInfomsg.Family != unix.AF_BRIDGE && tDel.IsZero() {
					tDel = s.at
				}
			case s := <-routes:
				u := s.u
				if u.Type == unix.RTM_NEWROUTE && u.Route.Table == 1 && isDefaultRoute(&u.Route) {
					if nhs, _ := routeNexthops(&u.Route, u.Route.LinkIndex); slices.Equal(nhs, []netip.Addr{nh2}) {
						tRoute = s.at
					}
				}
			case <-timeout:
				b.Fatalf("trial %d: no route without the deleted port's nexthop", i)
			}
		}
		fromNotif = append(fromNotif, max(tRoute.Sub(tDel), 0))
		fromCall = append(fromCall, tRoute.Sub(t0))
	}
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(fromNotif, 0.50), "p50-ms")
	b.ReportMetric(pct(fromNotif, 0.99), "p99-ms")
	b.ReportMetric(pct(fromCall, 0.50), "p50-from-del-call-ms")
	b.ReportMetric(pct(fromCall, 0.99), "p99-from-del-call-ms")
	b.ReportMetric(float64(len(fromNotif)), "trials")
}
