package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
)

// rssTargets is the size of the RSS benchmark's bed.
const rssTargets = 100

// BenchmarkProxyRSS measures the resident memory of the proxy process
// serving rssTargets target connections and memLBs LB connections, all
// real veths through the lab's forwarder (the bed of TestProxyMemory, which
// reports more). It reports the VmRSS in MiB after setup (rss-MiB), before
// the targets connected (idle-rss-MiB), and the setup time per target
// connection (sequential Requests through the in-process NSMgr and
// forwarder).
func BenchmarkProxyRSS(b *testing.B) {
	testutil.RequireRoot(b)
	if testing.Short() {
		b.Skip("builds and runs binaries with 100+ veth pairs")
	}
	r := bringUpTargets(b, rssTargets, nil)
	var kib int
	for b.Loop() {
		var err error
		kib, err = r.bd.proxy.rssKiB()
		require.NoError(b, err)
	}
	b.ReportMetric(0, "ns/op") // the loop only reads /proc
	b.ReportMetric(float64(kib)/1024, "rss-MiB")
	b.ReportMetric(float64(r.idle.rssKiB)/1024, "idle-rss-MiB")
	b.ReportMetric(float64(r.setup.Milliseconds())/rssTargets, "ms/target-conn")
	b.Logf("proxy VmRSS with %d LBs: %.1f MiB; with %d targets more: %.1f MiB (setup %s)",
		memLBs, float64(r.idle.rssKiB)/1024, rssTargets, float64(kib)/1024, r.setup)
}
