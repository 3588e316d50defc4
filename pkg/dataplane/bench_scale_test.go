package dataplane

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/testutil"
)

// addPortTime returns the median time of an Apply that adds one port to a
// bridge that has n, over trials (each trial removes the port again,
// untimed), and the median time of the kernel's own part: the same enslave
// written directly, interleaved with the Applies so that both see the same
// load. The state also holds two LBs and 100 VIPs, as a proxy's does.
func addPortTime(b *testing.B, n, trials int) (apply, kernel, unchanged time.Duration) {
	ns := testutil.NewNetNS(b, "bport")
	h := handle(b, ns)
	ports := make([]int, 0, n+1)
	for i := range n + 1 {
		name := fmt.Sprintf("t%d", i)
		require.NoError(b, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "x"}))
		l, err := h.LinkByName(name)
		require.NoError(b, err)
		require.NoError(b, h.LinkSetUp(l))
		ports = append(ports, l.Attrs().Index)
	}
	slices.Sort(ports)
	dp := newDP(b, ns, Options{DisableConntrackFlush: true, AnnounceCount: -1})
	s := bigState(100, 2, 0)
	s.Ports = portsOf(ports[:n]...)
	plus := s
	plus.Ports = portsOf(ports...)
	require.NoError(b, dp.Apply(s))
	w := dp.Stats().Writes
	require.NoError(b, dp.Apply(plus))
	require.Equal(b, w+1, dp.Stats().Writes, "adding a port is one write")
	require.NoError(b, dp.Apply(s))

	// The kernel's part: the extra port, once the Dataplane released it, is
	// not wanted, so it leaves the direct writes alone.
	extra := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: ports[n]}}
	applies := make([]time.Duration, 0, trials)
	kernels := make([]time.Duration, 0, trials)
	same := make([]time.Duration, 0, trials)
	for range trials {
		t0 := time.Now()
		require.NoError(b, dp.Apply(s))
		same = append(same, time.Since(t0))
		t0 = time.Now()
		require.NoError(b, dp.Apply(plus))
		applies = append(applies, time.Since(t0))
		require.NoError(b, dp.Apply(s))
		t0 = time.Now()
		require.NoError(b, h.LinkSetMasterByIndex(extra, dp.BridgeIndex()))
		kernels = append(kernels, time.Since(t0))
		require.NoError(b, h.LinkSetNoMaster(extra))
	}
	return median(applies), median(kernels), median(same)
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkAddPort measures, in the same run, the Apply that adds one port
// (one target) to a bridge of 100 and of 1,000 ports, beside the kernel's
// own enslave of a port to the same bridge (Linux's bridge makes that
// O(ports) by itself) and an Apply that changes nothing (the Dataplane's
// own cost of reading a whole State).
func BenchmarkAddPort(b *testing.B) {
	trials := max(b.N, 300)
	a100, k100, u100 := addPortTime(b, 100, trials)
	a1000, k1000, u1000 := addPortTime(b, 1000, trials)
	b.ReportMetric(float64(a100.Microseconds()), "us-apply-at-100")
	b.ReportMetric(float64(a1000.Microseconds()), "us-apply-at-1000")
	b.ReportMetric(float64(a1000)/float64(a100), "ratio-1000/100")
	b.ReportMetric(float64(k1000)/float64(k100), "kernel-ratio-1000/100")
	b.Logf("FIGURE: add one port (median): Apply %v at 100 ports, %v at 1000 (ratio %.2f); the kernel's enslave alone %v and %v (ratio %.2f); "+
		"Apply minus enslave %v and %v; an unchanged Apply %v and %v",
		a100, a1000, float64(a1000)/float64(a100), k100, k1000, float64(k1000)/float64(k100),
		a100-k100, a1000-k1000, u100, u1000)
}

// ctFill creates n UDP conntrack entries in ns between other hosts, in
// process.
func ctFill(b *testing.B, ns *testutil.NetNS, n int) {
	b.Helper()
	c := ctDial(b, ns)
	for i := range n {
		src := netip.AddrFrom4([4]byte{10, 1, byte(i >> 16), byte(i >> 8)})
		dst := netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
		require.NoError(b, ctCreateUDP(c, src, dst, uint16(1024+i%60000), 53))
	}
}

// ctFillVIPs creates perVIP UDP conntrack entries from each of vips.
func ctFillVIPs(b *testing.B, ns *testutil.NetNS, vips []netip.Prefix, perVIP int) {
	b.Helper()
	c := ctDial(b, ns)
	for _, v := range vips {
		for i := range perVIP {
			require.NoError(b, ctCreateUDP(c, v.Addr(), netip.AddrFrom4([4]byte{198, 19, 0, byte(i)}), uint16(2000+i), 53))
		}
	}
}

// BenchmarkFlushRemovedVIPs measures an Apply that removes 100 VIPs while
// the host's table holds 50,000 conntrack entries: one dump, filtered in
// process for all of them. The baseline is the old way, one full dump per
// removed VIP, measured on 10 VIPs and reported per VIP (the old code paid
// it twice for each of the 100: once in Apply and once from the proxy).
func BenchmarkFlushRemovedVIPs(b *testing.B) {
	const entries, removed, perVIP = 50000, 100, 10
	ns := testutil.NewNetNS(b, "bct")
	dp := newDP(b, ns, Options{AnnounceCount: -1})
	s := bigState(removed, 2, 0)
	require.NoError(b, dp.Apply(s))
	empty := State{BridgeAddrs: s.BridgeAddrs, Nexthops: s.Nexthops}

	var onePass time.Duration
	var deleted, onePassAlloc uint64
	ctFill(b, ns, entries-removed*perVIP)
	trials := max(b.N, 3)
	for range trials {
		ctFillVIPs(b, ns, s.VIPs, perVIP)
		require.NoError(b, dp.Apply(s))
		before := dp.Stats().ConntrackDeleted
		a0 := totalAlloc()
		t0 := time.Now()
		require.NoError(b, dp.Apply(empty))
		onePass += time.Since(t0)
		onePassAlloc += totalAlloc() - a0
		deleted += dp.Stats().ConntrackDeleted - before
	}
	onePass /= time.Duration(trials)
	onePassAlloc /= uint64(trials)

	// Baseline of the memory: the library's dump, which returns the whole
	// table at once (what the flush used before it streamed).
	conn := ctDial(b, ns)
	h0 := liveHeap()
	a0 := totalAlloc()
	flows, err := conn.Dump(nil)
	require.NoError(b, err)
	libraryAlloc := totalAlloc() - a0
	libraryHeld := liveHeap() - h0
	runtime.KeepAlive(flows)
	b.ReportMetric(float64(onePassAlloc)/1e6, "MB-alloc-one-pass")
	b.ReportMetric(float64(libraryAlloc)/1e6, "MB-alloc-library-dump-baseline")
	b.ReportMetric(float64(libraryHeld)/1e6, "MB-held-library-dump-baseline")
	b.Logf("FIGURE: the flush allocates %.1f MB for a table of %d entries, holding one receive buffer and the matches; "+
		"the library's dump of it allocates %.1f MB and holds %.1f MB at once",
		float64(onePassAlloc)/1e6, len(flows), float64(libraryAlloc)/1e6, float64(libraryHeld)/1e6)

	// Baseline: one dump per VIP.
	const sample = 10
	ctFillVIPs(b, ns, s.VIPs, perVIP)
	t0 := time.Now()
	for _, v := range s.VIPs[:sample] {
		require.NoError(b, dp.FlushConntrackPrefix(v))
	}
	oneVIP := time.Since(t0) / sample
	b.ReportMetric(float64(onePass.Milliseconds()), "ms-one-pass")
	b.ReportMetric(float64(oneVIP.Milliseconds()), "ms-per-vip-baseline")
	b.ReportMetric(float64(deleted)/float64(trials), "entries-deleted")
	b.Logf("FIGURE: removing %d VIPs with %d conntrack entries: %v in one pass (%d entries deleted); "+
		"baseline one dump per VIP: %v a VIP, so %v for %d and %v with the proxy's second flush",
		removed, entries, onePass, deleted/uint64(trials), oneVIP, oneVIP*removed, removed, 2*oneVIP*removed)
}

// liveHeap is the heap that a collection keeps.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// totalAlloc is the bytes the process has allocated so far.
func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}
