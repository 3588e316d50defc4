package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/proxyd"
)

// Environment of TestProxyMemory.
const (
	// memTargetsEnv is how many target connections it brings up (default
	// memDefaultTargets; docs/performance.md's figures are at 100, 500 and 1,000).
	memTargetsEnv = "CAUSEWAY_PROXY_MEM_TARGETS"
	// memProfileEnv names a directory that receives the proxy's heap profile
	// and goroutine dump once the targets are up (`go tool pprof -top`).
	memProfileEnv = "CAUSEWAY_PROXY_MEM_PROFILE"
	// memProxyEnv is added to the proxy's environment (space-separated), to
	// compare runtime settings: "GOGC=50", "GOMEMLIMIT=48MiB".
	memProxyEnv       = "CAUSEWAY_PROXY_MEM_ENV"
	memDefaultTargets = 100
	memLBs            = 4
)

// memUse is the proxy's memory at one moment.
type memUse struct {
	rssKiB, hwmKiB int
	anonKiB        int // RssAnon: VmRSS without the mapped binary (RssFile)
	mem            proxyd.MemoryState
	goroutines     int
	fds            int
	dp             dataplane.Stats // the dataplane's counters
}

func (u memUse) String() string {
	const mib = 1 << 20
	return fmt.Sprintf("VmRSS %.1f MiB (anonymous %.1f MiB), VmHWM %.1f MiB, heap in use %.1f MiB (objects %.1f MiB), stacks %.1f MiB, Go runtime total %.1f MiB, %d goroutines, %d fds",
		float64(u.rssKiB)/1024, float64(u.anonKiB)/1024, float64(u.hwmKiB)/1024, float64(u.mem.HeapInuse)/mib, float64(u.mem.HeapAlloc)/mib,
		float64(u.mem.StackInuse)/mib, float64(u.mem.Sys)/mib, u.goroutines, u.fds)
}

// memUse reads the proxy's /proc status and asks its debug socket for the
// Go runtime's figures.
func (b *bed) memUse() memUse {
	t := b.t
	t.Helper()
	var u memUse
	var err error
	u.rssKiB, err = b.proxy.statusKiB("VmRSS")
	require.NoError(t, err)
	u.hwmKiB, err = b.proxy.statusKiB("VmHWM")
	require.NoError(t, err)
	u.anonKiB, err = b.proxy.statusKiB("RssAnon")
	require.NoError(t, err)
	st := b.debugState()
	u.mem, u.goroutines, u.fds = st.Memory, st.Goroutines, st.FDs
	if st.Dataplane != nil {
		u.dp = st.Dataplane.Stats
	}
	return u
}

// saveDebug writes what the proxy's debug socket answers for path into
// dir/name.
func (b *bed) saveDebug(dir, name, path string) {
	t := b.t
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name))
	require.NoError(t, err)
	defer f.Close()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	require.NoError(t, proxyd.GetDebug(ctx, filepath.Join(b.dir, "debug.sock"), path, f), "GET %s", path)
}

// memRun is a bed with memLBs LB connections and n target connections
// brought up one after the other, and the proxy's memory before and after.
type memRun struct {
	bd       *bed
	n        int
	idle, up memUse
	setup    time.Duration // the n sequential Requests
	// CPU time used during them by the proxy (in user space and in the
	// kernel), the IPAM, and this process (the lab's NSM control plane,
	// forwarder and target NSCs).
	proxyUser, proxySys, ipamCPU, bedCPU time.Duration
}

// selfCPU is the CPU time this process has used.
func selfCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	require.NoError(tb, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// bringUpTargets starts the bed (proxyEnv added to the proxy's
// environment), waits for the LB connections, then connects n targets
// spread over a few target namespaces and waits until each is a bridge
// port. When the test ends, closing the connections must remove every
// target veth.
func bringUpTargets(tb testing.TB, n int, proxyEnv []string) *memRun {
	tb.Helper()
	// Two addresses per connection (the target's and the proxy's end), and
	// room to spare: in the node subnet, and within the IPAM's bound on a
	// node subnet's addresses (1,024 by default: 500 targets at most).
	addrs := 2*(n+memLBs) + 16
	prefixLen := 32
	for (1<<(32-prefixLen))-2 < addrs {
		prefixLen--
	}
	bd := startBed(tb, bedConfig{ipFamily: "ipv4", lbs: memLBs, logLevel: "INFO", proxyEnv: proxyEnv,
		ipamEnv: []string{"IPAM_NODE_PREFIX_LENGTH_IPV4=" + strconv.Itoa(prefixLen),
			"IPAM_MAX_CHILDREN_PER_NODE=" + strconv.Itoa(max(addrs, 1024))}})
	require.Eventually(tb, func() bool {
		ports, _ := bridgePorts(tb, bd.proxyNS, bridge)
		return len(ports) == memLBs
	}, 2*converge, poll, "the LB connections must be up")
	r := &memRun{bd: bd, n: n, idle: bd.memUse()}

	// A few target namespaces, as on a node of a few pods with many
	// connections each.
	nss := make([]*testutil.NetNS, 4)
	for i := range nss {
		nss[i] = testutil.NewNetNS(tb, "tgt")
	}
	// Registered before the targets, so run after their connections are
	// closed: every target veth (both ends) must be gone, the LBs' stay.
	tb.Cleanup(func() {
		assert.Eventually(tb, func() bool {
			for _, ns := range nss {
				if len(vethsIn(tb, ns)) != 0 {
					return false
				}
			}
			ports, _ := bridgePorts(tb, bd.proxyNS, bridge)
			return len(ports) == memLBs
		}, 2*converge+time.Duration(n)*10*time.Millisecond, poll, "closing the target connections must remove their veths")
	})
	proxyUser0, proxySys0, err := bd.proxy.cpuTime()
	require.NoError(tb, err)
	ipamUser0, ipamSys0, err := bd.ipam.cpuTime()
	require.NoError(tb, err)
	bedCPU0 := selfCPU(tb)
	start := time.Now()
	for i := range n {
		bd.connectTarget(nss[i%len(nss)], fmt.Sprintf("target-%04d", i), fmt.Sprintf("nsm%04d", i))
	}
	r.setup = time.Since(start)
	proxyUser1, proxySys1, err := bd.proxy.cpuTime()
	require.NoError(tb, err)
	ipamUser1, ipamSys1, err := bd.ipam.cpuTime()
	require.NoError(tb, err)
	r.proxyUser, r.proxySys = proxyUser1-proxyUser0, proxySys1-proxySys0
	r.ipamCPU, r.bedCPU = ipamUser1+ipamSys1-ipamUser0-ipamSys0, selfCPU(tb)-bedCPU0
	require.Eventually(tb, func() bool {
		ports, _ := bridgePorts(tb, bd.proxyNS, bridge)
		return len(ports) == memLBs+n
	}, 2*converge+time.Duration(n)*10*time.Millisecond, poll, "every connection must be a bridge port")
	r.up = bd.memUse()
	return r
}

// TestProxyMemory brings up memLBs LB connections and then
// CAUSEWAY_PROXY_MEM_TARGETS target connections (default 100) to the real
// proxy binary, all real veths through the lab's forwarder, and reports the
// proxy's resident memory, peak, Go heap, goroutines and descriptors as
// FIGURE lines, with the LBs only and with the targets. Its debug socket
// serves a heap profile. With CAUSEWAY_PROXY_MEM_PROFILE=dir the heap
// profile and a goroutine dump are kept there; CAUSEWAY_PROXY_MEM_ENV adds
// to the proxy's environment.
func TestProxyMemory(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("builds and runs binaries with 100+ veth pairs")
	}
	n := memDefaultTargets
	if v, err := strconv.Atoi(os.Getenv(memTargetsEnv)); err == nil && v > 0 {
		n = v
	}
	var env []string
	dir := os.Getenv(memProfileEnv)
	if dir != "" {
		// A sample every 4 KiB allocated instead of 512 KiB: a profile
		// that sees the per-connection allocations.
		env = []string{"GODEBUG=memprofilerate=4096"}
	} else {
		dir = t.TempDir()
	}
	r := bringUpTargets(t, n, append(env, strings.Fields(os.Getenv(memProxyEnv))...))
	idle, up := r.idle, r.up

	t.Logf("FIGURE: proxy memory with %d LBs: %v", memLBs, idle)
	t.Logf("FIGURE: proxy memory with %d LBs and %d targets: %v (set-up %.0f ms a target)",
		memLBs, n, up, float64(r.setup.Milliseconds())/float64(n))
	perTarget := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(n) }
	t.Logf("FIGURE: CPU a target (%d targets): proxy %.2f ms in user space + %.2f ms in the kernel, ipam %.2f ms, "+
		"the lab's NSM control plane, forwarder and NSCs %.2f ms",
		n, perTarget(r.proxyUser), perTarget(r.proxySys), perTarget(r.ipamCPU), perTarget(r.bedCPU))
	t.Logf("FIGURE: proxy memory per target (%d targets): VmRSS %.0f KiB, heap in use %.0f KiB, %.1f goroutines, %.2f fds",
		n, float64(up.rssKiB-idle.rssKiB)/float64(n), float64(up.mem.HeapInuse-idle.mem.HeapInuse)/1024/float64(n),
		float64(up.goroutines-idle.goroutines)/float64(n), float64(up.fds-idle.fds)/float64(n))

	per := func(a, b uint64) float64 { return float64(a-b) / float64(n) }
	t.Logf("FIGURE: dataplane work a target (%d targets): %.1f link events, %.2f netlink writes, %.2f reads, %.2f announced addresses",
		n, per(up.dp.LinkEvents, idle.dp.LinkEvents), per(up.dp.Writes, idle.dp.Writes), per(up.dp.Reads, idle.dp.Reads),
		per(up.dp.Announcements, idle.dp.Announcements))

	require.NoError(t, os.MkdirAll(dir, 0o755))
	heap := fmt.Sprintf("proxy-heap-%d.pb.gz", n)
	r.bd.saveDebug(dir, heap, "/debug/pprof/heap")
	r.bd.saveDebug(dir, fmt.Sprintf("proxy-goroutines-%d.txt", n), "/debug/pprof/goroutine?debug=1")
	prof, err := os.ReadFile(filepath.Join(dir, heap))
	require.NoError(t, err)
	require.True(t, len(prof) > 2 && prof[0] == 0x1f && prof[1] == 0x8b, "the debug socket serves a (gzipped) heap profile")
	t.Logf("heap profile and goroutine dump in %s", dir)
}
