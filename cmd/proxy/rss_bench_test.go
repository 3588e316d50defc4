package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
)

// Size of the RSS benchmark's bed.
const (
	rssTargets          = 100
	rssLBs              = 4
	rssTargetNamespaces = 4
)

// BenchmarkProxyRSS measures the resident memory of the proxy process
// serving rssTargets target connections (spread over a few target
// namespaces) and rssLBs LB connections, all real veths through the lab's
// forwarder. It reports the VmRSS in MiB after setup (rss-MiB), before the
// targets connected (idle-rss-MiB), and the setup time per target
// connection (sequential Requests through the in-process NSMgr and
// forwarder).
func BenchmarkProxyRSS(b *testing.B) {
	testutil.RequireRoot(b)
	if testing.Short() {
		b.Skip("builds and runs binaries with 100+ veth pairs")
	}
	// A /22 node subnet leaves room for 2 addresses per connection.
	bd := startBed(b, bedConfig{ipFamily: "ipv4", lbs: rssLBs, logLevel: "INFO",
		ipamEnv: []string{"IPAM_NODE_PREFIX_LENGTH_IPV4=22"}})
	require.Eventually(b, func() bool {
		ports, _ := bridgePorts(b, bd.proxyNS, bridge)
		return len(ports) == rssLBs
	}, 2*converge, poll, "the LB connections must be up")

	idle, err := bd.proxy.rssKiB()
	require.NoError(b, err)

	nss := make([]*testutil.NetNS, rssTargetNamespaces)
	for i := range nss {
		nss[i] = testutil.NewNetNS(b, "tgt")
	}
	// Registered before the targets, so run after their connections are
	// closed: every target veth (both ends) must be gone, the LBs' stay.
	b.Cleanup(func() {
		assert.Eventually(b, func() bool {
			for _, ns := range nss {
				if len(vethsIn(b, ns)) != 0 {
					return false
				}
			}
			ports, _ := bridgePorts(b, bd.proxyNS, bridge)
			return len(ports) == rssLBs
		}, 2*converge, poll, "closing the target connections must remove their veths")
	})
	start := time.Now()
	for i := range rssTargets {
		bd.connectTarget(nss[i%len(nss)], fmt.Sprintf("target-%03d", i), fmt.Sprintf("nsm%03d", i))
	}
	setup := time.Since(start)
	require.Eventually(b, func() bool {
		ports, _ := bridgePorts(b, bd.proxyNS, bridge)
		return len(ports) == rssLBs+rssTargets
	}, 2*converge, poll, "every connection must be a bridge port")

	var kib int
	for b.Loop() {
		var err error
		kib, err = bd.proxy.rssKiB()
		require.NoError(b, err)
	}
	b.ReportMetric(0, "ns/op") // the loop only reads /proc
	b.ReportMetric(float64(kib)/1024, "rss-MiB")
	b.ReportMetric(float64(idle)/1024, "idle-rss-MiB")
	b.ReportMetric(float64(setup.Milliseconds())/rssTargets, "ms/target-conn")
	b.Logf("proxy VmRSS with %d LBs: %.1f MiB; with %d targets more: %.1f MiB (setup %s)",
		rssLBs, float64(idle)/1024, rssTargets, float64(kib)/1024, setup)
}
