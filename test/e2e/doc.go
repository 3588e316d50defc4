// Package e2e is Causeway's end-to-end suite on the lab (pkg/lab/labrun):
// every scenario brings up a fresh lab of real processes (proxy, ipam, nsp,
// NSM control plane, LB and target stubs) in network namespaces, drives it
// through a failure the system promises to survive, asserts on traffic and
// kernel state, tears the lab down and checks that nothing of it remains.
// It needs root; it is skipped under -short. Measured figures are logged as
// "FIGURE:" lines.
//
// Scenarios: 1 TestIngress, 2 TestEgress, 3 TestLBLoss and
// TestLBProcessLoss, 4 TestTargetLeaves, 5 TestProxyCrash, 6 TestIPAMCrash,
// 7 TestVIPChange, 8 TestBadVIP, TestUnknownService and
// TestIPAMPoolTooSmall, 9 the clean-up check after every one (assertClean);
// TestThroughputFigure measures docs/performance.md's throughput ratio;
// TestMovingFromMeridioProxy starts the proxy over Meridio's leftover
// rules and routes; TestLBDatapathBroken cuts an LB off without
// NSM noticing, TestLBDatapathLossy loses 5 % of its packets.
package e2e
