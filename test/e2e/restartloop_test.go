package e2e_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
	"github.com/causeway-net/causeway/pkg/proxyd"
)

// usage is what a process holds at one moment.
type usage struct {
	goroutines int // proxy only (from its debug state)
	fds        int
	rssKiB     int
	heapKiB    int // proxy only: the Go heap in use (from its debug state)
}

func (u usage) String() string {
	s := fmt.Sprintf("goroutines %d, fds %d, rss %d KiB", u.goroutines, u.fds, u.rssKiB)
	if u.heapKiB > 0 {
		s += fmt.Sprintf(", heap in use %d KiB", u.heapKiB)
	}
	return s
}

// processUsage reads the descriptors and resident memory of pid.
func processUsage(t *testing.T, pid int) usage {
	t.Helper()
	require.NotZero(t, pid, "the process runs")
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	u := usage{fds: len(fds)}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			u.rssKiB, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return u
}

func proxyUsage(t *testing.T, ctx context.Context, l *labrun.Lab) usage {
	t.Helper()
	st, err := proxyState(ctx, l)
	require.NoError(t, err)
	u := processUsage(t, l.PID("proxy"))
	u.goroutines = st.Goroutines
	u.heapKiB = int(st.Memory.HeapInuse / 1024)
	return u
}

// dumpProxy writes the proxy's goroutines (grouped by stack) to
// prefix.goroutines, its live heap (after a collection) to prefix.heap.pb.gz
// and the targets of its descriptors to prefix.fds, to compare rounds when
// something grows.
func dumpProxy(t *testing.T, ctx context.Context, l *labrun.Lab, prefix string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(prefix), 0o755))
	for name, path := range map[string]string{".goroutines": "/debug/pprof/goroutine?debug=1", ".heap.pb.gz": "/debug/pprof/heap?gc=1"} {
		f, err := os.Create(prefix + name)
		require.NoError(t, err)
		err = proxyd.GetDebug(ctx, l.ProxyDebugSocket(), path, f)
		require.NoError(t, errors.Join(err, f.Close()))
	}
	dir := fmt.Sprintf("/proc/%d/fd", l.PID("proxy"))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var fds strings.Builder
	for _, e := range ents {
		target, _ := os.Readlink(filepath.Join(dir, e.Name()))
		fmt.Fprintf(&fds, "%s %s\n", e.Name(), target)
	}
	require.NoError(t, os.WriteFile(prefix+".fds", []byte(fds.String()), 0o644))
}

// pooled are the IPAM's pools in the lab.
var pooled = []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16"), netip.MustParsePrefix("fd5a:ca5e::/48")}

// requireUniqueAddrs checks every address from the IPAM's pools on every
// interface of every namespace of the lab: none is on two interfaces.
func requireUniqueAddrs(t *testing.T, l *labrun.Lab) {
	t.Helper()
	where := map[netip.Addr]string{}
	for _, role := range append(append([]string{"proxy"}, l.LBs()...), l.Targets()...) {
		ns, err := netns.GetFromPath(l.NetNSPath(role))
		require.NoError(t, err)
		h, err := netlink.NewHandleAt(ns)
		ns.Close()
		require.NoError(t, err)
		addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
		h.Close()
		require.NoError(t, err)
		for _, a := range addrs {
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok || !(pooled[0].Contains(ip.Unmap()) || pooled[1].Contains(ip)) {
				continue
			}
			at := role + "/" + strconv.Itoa(a.LinkIndex)
			require.NotContains(t, where, ip.Unmap(), "%s is on %s and on %s", ip, where[ip.Unmap()], at)
			where[ip.Unmap()] = at
		}
	}
}

// TestRestartLoop restarts the IPAM, the configuration server and each LB
// in turn, round after round, with traffic running, and then the proxy a
// few times: after every round the lab is green, no address is on two
// interfaces, and the long-lived processes (the proxy through the first
// rounds, the IPAM through the proxy's restarts) end holding no more
// goroutines and descriptors than after the first round (a slack for
// connections that are being replaced). Memory is reported. With
// CAUSEWAY_E2E_RESTART_DUMP=dir the proxy's goroutines and descriptors are
// written there after every round, to compare.
func TestRestartLoop(t *testing.T) {
	l := newLab(t, nil)
	rounds := 8
	if v, err := strconv.Atoi(os.Getenv("CAUSEWAY_E2E_RESTART_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds+3)*2*time.Minute)
	defer cancel()
	ps := startProbers(t, ctx, l, vipOf(t, l, true))
	waitProbes(t, ps, time.Time{}, 20, "probes before the restarts")
	start := time.Now()

	var proxyUse []usage
	for r := range rounds {
		for _, c := range append([]string{"ipam", "nsp"}, l.LBs()...) {
			require.NoError(t, l.RestartComponent(c, stopGrace), "round %d: restart %s", r, c)
			requireGreen(t, ctx, l, waitLong, fmt.Sprintf("round %d: after %s restarted", r, c))
		}
		requireUniqueAddrs(t, l)
		proxyUse = append(proxyUse, proxyUsage(t, ctx, l))
		t.Logf("round %d: proxy %v", r, proxyUse[r])
		if dir := os.Getenv("CAUSEWAY_E2E_RESTART_DUMP"); dir != "" {
			dumpProxy(t, ctx, l, filepath.Join(dir, fmt.Sprintf("round-%02d", r)))
		}
	}
	var ipamUse []usage
	for r := range 3 {
		require.NoError(t, l.RestartComponent("proxy", stopGrace), "proxy restart %d", r)
		requireGreen(t, ctx, l, waitLong, fmt.Sprintf("after proxy restart %d", r))
		requireUniqueAddrs(t, l)
		ipamUse = append(ipamUse, processUsage(t, l.PID("ipam")))
	}

	first, last := proxyUse[0], proxyUse[len(proxyUse)-1]
	t.Logf("FIGURE: restart loop (%d rounds of ipam, nsp and LB restarts, %v): proxy after the first round %v, after the last %v; "+
		"ipam through 3 proxy restarts %v", rounds, time.Since(start).Round(time.Second), first, last, ipamUse)
	// The slack is one gRPC connection being replaced (its reader, writer
	// and keepalive goroutines, a stream, its socket): a leak of one per
	// round, as each debug request left before, exceeds it by the 8th.
	require.LessOrEqual(t, last.goroutines, first.goroutines+5, "the proxy's goroutines do not grow round after round")
	require.LessOrEqual(t, last.fds, first.fds+2, "nor its descriptors")
	// Each LB restart flushes the conntrack entries of its nexthops. When
	// the flush held the whole table (the probes' flows) at once, the
	// collector's goal and the RSS rose round after round: 31 -> 49 MiB in
	// 8 rounds (1.5 MiB now).
	require.LessOrEqual(t, last.rssKiB, first.rssKiB+10<<10, "the proxy's RSS does not grow round after round")
	require.LessOrEqual(t, ipamUse[2].fds, ipamUse[0].fds+2, "the IPAM's descriptors do not grow with proxy restarts")
	for network, p := range ps {
		s := p.Stop()
		t.Logf("FIGURE: restart loop (%s): %v", network, s.After(start))
	}
}
