package liveness_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/api/pkg/api/networkservice/payload"
	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/tools/grpcutils"
	"github.com/networkservicemesh/sdk/pkg/tools/sandbox"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/nsm/chain/liveness"
	"github.com/causeway-net/causeway/pkg/nsm/nsmtest"
)

// TestSandboxWhoseDown: a client on node 0 with the heal check on node 0's
// NSMgr, which reports the client's connection down in each case; the far
// end's interface answers on the data path or not.
//
//   - remote-nsmgr-restarted: the endpoint on node 1, node 1's NSMgr
//     restarts. Answering, heal re-requests the connection as it is through
//     the new NSMgr and never closes it (before the check took the data
//     path's word for another node's endpoint, a proxy closed its link to an
//     LB that still answered: NSMReplaced on three nodes); silent, the
//     NSMgr is believed and heal reselects, closing it first.
//   - local-endpoint-restarted: the endpoint on node 0 stops serving, then
//     serves again. Answering, heal re-requests as it is until the endpoint
//     is back (the NSMgr cannot tell its endpoint's going from its
//     forwarder's, see TestSandboxLocalForwarderReplaced); silent, heal
//     reselects, closing it first. An endpoint gone for good is dropped by
//     its owner (the full mesh, when its registration goes: cmd/proxy
//     TestProxyKernelE2E).
func TestSandboxWhoseDown(t *testing.T) {
	nsmtest.Quiet()
	restartRemoteNSMgr := func(d *sandbox.Domain, _ *sandbox.EndpointEntry, _ func() bool) { d.Nodes[1].NSMgr.Restart() }
	// Back once the heal has asked about the data path: the NSMgr has
	// reported the connection down by then, however busy the machine.
	restartEndpoint := func(_ *sandbox.Domain, lb *sandbox.EndpointEntry, asked func() bool) {
		lb.Cancel()
		require.Eventually(t, asked, 30*time.Second, 10*time.Millisecond, "the heal asks about the data path")
		lb.Restart()
	}
	for _, c := range []healCase{
		{"remote-nsmgr-restarted/answering", 1, restartRemoteNSMgr, true, true},
		{"remote-nsmgr-restarted/silent", 1, restartRemoteNSMgr, false, false},
		{"local-endpoint-restarted/answering", 0, restartEndpoint, true, true},
		{"local-endpoint-restarted/silent", 0, restartEndpoint, false, false},
	} {
		t.Run(c.name, func(t *testing.T) { testHeal(t, c) })
	}
}

// TestSandboxLocalForwarderReplaced: a client and its endpoint on one node
// whose forwarder is replaced. The NSMgr reports the connection down (its
// stream to the forwarder broke), as it would for an endpoint that died.
// Answering, heal re-requests the connection as it is through the new
// forwarder and never closes it (before the check took the data path's
// word for an endpoint of its own NSMgr, a proxy closed its links to the
// LBs and cut traffic until they healed: NSMReplaced when the forwarder
// went first); silent, heal reselects, closing it first.
func TestSandboxLocalForwarderReplaced(t *testing.T) {
	nsmtest.Quiet()
	restartForwarder := func(d *sandbox.Domain, _ *sandbox.EndpointEntry, _ func() bool) {
		require.Len(t, d.Nodes[0].Forwarders, 1)
		for _, f := range d.Nodes[0].Forwarders {
			f.Restart()
		}
	}
	for _, c := range []healCase{
		{"answering", 0, restartForwarder, true, true},
		{"silent", 0, restartForwarder, false, false},
	} {
		t.Run(c.name, func(t *testing.T) { testHeal(t, c) })
	}
}

// healCase is a heal to watch: the endpoint on lbNode of two nodes, the
// client on node 0 with the heal check on node 0's NSMgr; replace makes the
// NSMgr report the connection down (asked reports whether the heal has
// asked about the data path yet); the far end answers on the data path or
// not; the connection is kept (re-requested as it is) or reselected.
type healCase struct {
	name           string
	lbNode         int
	replace        func(d *sandbox.Domain, lb *sandbox.EndpointEntry, asked func() bool)
	answers, keeps bool
}

func testHeal(t *testing.T, c healCase) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const service = "lb.trench"
	domain := nsmtest.NewNodes(ctx, t, 2, service)
	served := &nsmtest.Served{}
	lb := domain.Nodes[c.lbNode].NewEndpoint(ctx, &registryapi.NetworkServiceEndpoint{Name: "lb", NetworkServiceNames: []string{service}},
		sandbox.GenerateTestToken, served)

	nsmgr, err := liveness.Dial(grpcutils.URLToTarget(domain.Nodes[0].NSMgr.URL), sandbox.DialOptions()...)
	require.NoError(t, err)
	defer func() { _ = nsmgr.Close() }()
	closed := &nsmtest.Closes{}
	var asked atomic.Bool
	nsc := nsmtest.HealingClient(ctx, domain.Nodes[0].NSMgr.URL, "proxy",
		nsmgr.HealOptions(nil, func(*networkservice.Connection) bool { asked.Store(true); return c.answers }), nsmgr.NewClient(), closed)
	conn, err := nsc.Request(ctx, &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{
		Id: "proxy-lb", NetworkService: service, NetworkServiceEndpointName: "lb", Payload: payload.Ethernet,
	}})
	require.NoError(t, err)
	require.Equal(t, 1, served.Count())
	// The Close waits for the heal's request in flight and ends the heal.
	defer func() { _, _ = nsc.Close(ctx, conn) }()

	c.replace(domain, lb, asked.Load)
	require.Eventually(t, func() bool { return served.Count() > 1 }, 30*time.Second, 10*time.Millisecond,
		"healed once the control plane is back")
	if c.keeps {
		require.Zero(t, closed.Of("proxy-lb"), "the far end answers: re-requested as it is, never closed")
	} else {
		require.Positive(t, closed.Of("proxy-lb"), "the far end is silent: reselected, closed first")
	}
}
