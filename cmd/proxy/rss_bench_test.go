package main

import (
	"fmt"
	"testing"
	"time"

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
// forwarder. It reports the VmRSS in MiB after setup (rss-MiB) and the
// setup time per target connection.
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

	nss := make([]*testutil.NetNS, rssTargetNamespaces)
	for i := range nss {
		nss[i] = testutil.NewNetNS(b, "tgt")
	}
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
	b.ReportMetric(float64(kib)/1024, "rss-MiB")
	b.ReportMetric(float64(setup.Milliseconds())/rssTargets, "ms/target-conn")
	b.Logf("proxy VmRSS with %d targets and %d LBs: %.1f MiB (setup %s)", rssTargets, rssLBs, float64(kib)/1024, setup)
}
